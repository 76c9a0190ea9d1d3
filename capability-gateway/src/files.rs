//! Every file the command writes, written one way: never through a symbolic link, and never over
//! an existing file unless the user said so.
//!
//! A new file is created with `O_CREAT | O_EXCL` (`create_new`), which refuses any existing
//! path, a symbolic link (even a dangling one) included, so a link planted where the command
//! will write is never followed. A file that is replaced (a lockfile `pin` updates, an approval
//! written with `--force`) is written to a new file beside it and renamed over it: a rename
//! replaces a link itself, never its target, and a crash never leaves half a file.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a file was not written.
#[derive(Debug)]
pub struct WriteError(String);

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WriteError {}

/// A new file at `path` (mode `mode` on Unix), or an error when anything, a file or a symbolic
/// link, is there already.
pub fn create_new(path: &Path, mode: u32) -> Result<File, WriteError> {
    open_new(path, mode).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            WriteError(format!(
                "`{}` exists (a file or a symbolic link); not overwriting it",
                path.display()
            ))
        } else {
            WriteError(format!("cannot write `{}`: {e}", path.display()))
        }
    })
}

/// Writes `contents` to `path`: a new file, or, with `replace`, in place of whatever is there
/// (a symbolic link there is replaced, not followed). Without `replace`, an existing path is an
/// error that says to give `--force`.
///
/// ```
/// use capability_gateway::files::write;
///
/// # let dir = std::env::temp_dir().join(format!("files-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("approval.json");
/// write(&path, b"one", false)?;
/// assert!(write(&path, b"two", false).unwrap_err().to_string().contains("--force"));
/// write(&path, b"two", true)?;
/// assert_eq!(std::fs::read(&path)?, b"two");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write(path: &Path, contents: &[u8], replace: bool) -> Result<(), WriteError> {
    let exists = std::fs::symlink_metadata(path).is_ok();
    if exists && !replace {
        return Err(WriteError(format!(
            "`{}` exists; give `--force` to replace it",
            path.display()
        )));
    }
    if !exists {
        let mut file = create_new(path, 0o644)?;
        return file
            .write_all(contents)
            .and_then(|()| file.sync_all())
            .map_err(|e| WriteError(format!("cannot write `{}`: {e}", path.display())));
    }
    replace_file(path, contents)
}

/// `path` created for writing with `mode`, never one that exists.
fn open_new(path: &Path, mode: u32) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)
}

/// Writes `contents` in place of `path` (created when missing): to a new file beside it, then
/// renamed over it. A symbolic link at `path` is replaced, never followed; so is one planted
/// where the new file goes.
pub fn replace_file(path: &Path, contents: &[u8]) -> Result<(), WriteError> {
    let fail = |e: std::io::Error| WriteError(format!("cannot write `{}`: {e}", path.display()));
    let beside = beside(path);
    // A file left by a crash, or a link planted there: removed, never written through.
    match std::fs::remove_file(&beside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    // Its failure names `path`, the file asked for, not the new file beside it.
    let mut file = open_new(&beside, 0o644).map_err(fail)?;
    let written = file
        .write_all(contents)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&beside, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&beside);
        return Err(fail(e));
    }
    Ok(())
}

/// The new file's path: beside `path`, named after it.
fn beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".capability-new");
    path.with_file_name(name)
}

/// An error unless `path` is free of a symbolic link at its last component: for a file another
/// library opens (a SQLite database `db migrate` creates), which would follow one.
pub fn not_a_link(path: &Path) -> Result<(), WriteError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(WriteError(format!(
            "`{}` is a symbolic link; give the file itself (a link is never written through)",
            path.display()
        ))),
        _ => Ok(()),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_planted_symlink_is_never_written_through() {
        let dir = capability_testkit::Scratch::new("files-links");
        let target = dir.join("target");
        std::fs::write(&target, "precious").expect("write");
        let link = dir.join("out.json");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        // Without --force: refused.
        assert!(write(&link, b"evil", false).is_err());
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "precious");
        // With it: the link is replaced by a file; its target is untouched.
        write(&link, b"approval", true).expect("replaces the link");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "precious");
        assert!(
            !std::fs::symlink_metadata(&link)
                .expect("meta")
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&link).expect("read"), "approval");
        // A link planted where the new file goes is removed, not followed.
        let lock = dir.join("capability.lock");
        std::os::unix::fs::symlink(&target, beside(&lock)).expect("symlink");
        replace_file(&lock, b"pins").expect("writes");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "precious");
        assert!(not_a_link(&link).is_ok());
        std::os::unix::fs::symlink(&target, dir.join("db")).expect("symlink");
        assert!(not_a_link(&dir.join("db")).is_err());
    }

    #[test]
    fn a_file_that_cannot_be_replaced_is_named_not_the_new_one_beside_it() {
        let dir = capability_testkit::Scratch::new("files-named");
        let lock = dir.join("no-such-folder").join("capability.lock");
        let WriteError(why) = replace_file(&lock, b"pins").expect_err("no folder");
        assert_eq!(
            why,
            format!(
                "cannot write `{}`: No such file or directory (os error 2)",
                lock.display()
            )
        );
    }
}
