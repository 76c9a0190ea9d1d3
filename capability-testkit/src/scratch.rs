//! A test's own folder under the temporary directory, removed when the test passes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The folders given to tests in this process.
static TAKEN: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Takes `dir` for one test of this process; panics when another took it. Two tests on one
/// folder delete each other's files, which fails one of them only when they happen to run at
/// once: this fails at once, whatever runs when.
fn claim(dir: &Path) {
    let fresh = TAKEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(dir.to_owned());
    assert!(
        fresh,
        "{} is another test's folder: give this test a name of its own",
        dir.display()
    );
}

/// A fresh folder at `dir` (emptied first) for one test, left in place for whoever reads what
/// it wrote; panics when another test of this process has `dir` (two tests on one folder would
/// delete each other's files when they happen to run at once) or when the folder cannot be
/// made.
pub fn fresh_dir(dir: PathBuf) -> PathBuf {
    claim(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("a scratch folder {}: {e}", dir.display()));
    dir
}

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
    /// Makes the folder; panics (the test fails) when it cannot, or when another test of this
    /// process took the same `name` ([`fresh_dir`]).
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("capability-{name}-{}", std::process::id()));
        Scratch {
            dir: fresh_dir(dir),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_given_twice_in_one_process_is_refused() {
        let dir = std::env::temp_dir().join(format!("capability-claim-{}", std::process::id()));
        let first = fresh_dir(dir.clone());
        std::fs::write(first.join("kept"), "the first test's").expect("write");
        let again = std::panic::catch_unwind(|| fresh_dir(dir.clone()));
        let message = again.expect_err("a second test on the folder is refused");
        let message = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(message.contains("is another test's folder"), "{message}");
        // The first test's files are still there.
        assert!(first.join("kept").is_file());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
