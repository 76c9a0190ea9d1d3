//! Whether a trail's path still names the file the sink writes ([`still_named`]), and whether
//! anything happened that could change that ([`Watch`]): asked before every call, without a
//! look up of the path each time.
//!
//! Looking the path up (`lstat`, a walk of every directory in it) before every call costs a
//! few microseconds on the path of the call. On Linux an inotify instance watches the file
//! (renamed, unlinked, replaced: its link count drops) and every directory above it (renamed
//! or removed), and [`Watch::quiet`] is one read that finds nothing queued; the sink looks the
//! path up only when something was, when it has no watch (another system; a directory above
//! the file that is a symbolic link, whose target could change without a word; no inotify
//! instance to be had), and at least every [`LOOK_EVERY`](super::LOOK_EVERY) regardless (what
//! inotify does not see: a file system mounted over a directory of the path).

use std::fs::File;
use std::path::Path;

use crate::AuditError;

/// Whether `named` (the trail's path, made absolute when the sink opened it; `path` as given,
/// for messages) still names `file`, the file this sink writes (whose device and inode are
/// `identity`): a trail removed or replaced (moved away, rotated, deleted) since it was opened
/// would take records no one will read, so it counts as a trail that cannot be written. Other
/// errors of looking it up (a directory made unreadable) say nothing about the file, and pass.
#[cfg(unix)]
pub(super) fn still_named(
    path: &Path,
    named: &Path,
    file: &File,
    identity: Option<(u64, u64)>,
) -> Result<(), AuditError> {
    use std::os::unix::fs::MetadataExt;
    let gone = |what: &str| AuditError::Io {
        path: path.display().to_string(),
        message: format!(
            "the file was {what} since this sink opened it; records written now would be \
             lost (restart the writer to open the trail again)"
        ),
    };
    let open = match identity {
        Some(identity) => Some(identity),
        None => file.metadata().ok().as_ref().and_then(self::identity),
    };
    match (open, std::fs::symlink_metadata(named)) {
        (Some((dev, ino)), Ok(named)) if dev != named.dev() || ino != named.ino() => {
            Err(gone("replaced by another file"))
        }
        (_, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(gone("removed")),
        _ => Ok(()),
    }
}

/// Elsewhere the path is not looked up.
#[cfg(not(unix))]
pub(super) fn still_named(
    _path: &Path,
    _named: &Path,
    _file: &File,
    _identity: Option<(u64, u64)>,
) -> Result<(), AuditError> {
    Ok(())
}

/// A file's device and inode (`None` where there are none to read).
pub(super) fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// The events of a trail's path.
pub(super) struct Watch {
    /// The inotify instance, non-blocking, read as a file.
    #[cfg(target_os = "linux")]
    inotify: std::fs::File,
}

impl Watch {
    /// A watch on `path` (absolute) and every directory above it; `None` where one cannot be
    /// had (the sink then looks the path up before every call).
    #[cfg(target_os = "linux")]
    pub(super) fn new(path: &Path) -> Option<Watch> {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        let own = AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_DONT_FOLLOW;
        inotify.add_watch(path, own).ok()?;
        let above = AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_DONT_FOLLOW
            | AddWatchFlags::IN_ONLYDIR;
        for dir in path.ancestors().skip(1) {
            // A symbolic link in the path is watched as a link, not through it: its target's
            // changes would go unseen.
            if std::fs::symlink_metadata(dir)
                .ok()?
                .file_type()
                .is_symlink()
            {
                return None;
            }
            inotify.add_watch(dir, above).ok()?;
        }
        Some(Watch {
            inotify: std::fs::File::from(std::os::fd::OwnedFd::from(inotify)),
        })
    }

    /// Elsewhere there is no watch.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn new(_path: &Path) -> Option<Watch> {
        None
    }

    /// Whether nothing happened since the last look (what happened is read and dropped: the
    /// caller then looks the path up).
    #[cfg(target_os = "linux")]
    pub(super) fn quiet(&self) -> bool {
        use std::io::Read;
        // What the events say does not matter, only that there are some: the buffer takes
        // a few (one with a name too long for it is an error, and an error means look too).
        let mut events = [0u8; 256];
        matches!(
            (&self.inotify).read(&mut events),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        )
    }

    /// Elsewhere there is no watch.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn quiet(&self) -> bool {
        false
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}
