//! A test's own folder under the temporary directory, removed when the test passes.

use std::path::{Path, PathBuf};

/// A fresh folder `<temp>/capability-<name>-<pid>` (emptied first), removed on drop, except
/// when the thread is panicking: a failed test leaves what it wrote for whoever reads why.
///
/// ```
/// let scratch = capability_testkit::Scratch::new("doc");
/// std::fs::write(scratch.join("a.txt"), "a").unwrap();
/// let path = scratch.path().to_owned();
/// drop(scratch);
/// assert!(!path.exists());
/// ```
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Makes the folder; panics (the test fails) when it cannot.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("capability-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("a scratch folder {}: {e}", dir.display()));
        Scratch { dir }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
