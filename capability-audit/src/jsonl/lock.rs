//! Taking a JSON Lines trail's lock: one writer at a time.

use std::fs::File;
use std::time::{Duration, Instant};

/// How long opening a trail waits for a writer that is letting go of it.
const LOCK_WAIT: Duration = Duration::from_millis(250);

/// Locks `file` for writing, waiting up to [`LOCK_WAIT`] while another holds it: a writer
/// closing holds the lock until its file is closed everywhere, and a process that forks at that
/// moment (any thread starting a child, before the child's `exec` closes the inherited file)
/// holds it a little longer. A writer that keeps it is refused after the wait.
pub(super) fn lock_soon(file: &File) -> Result<(), std::fs::TryLockError> {
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("capability-lock-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir.join("trail.jsonl")
    }

    #[test]
    fn a_lock_let_go_of_within_the_wait_is_taken() {
        let path = scratch("let-go");
        let held = File::create(&path).expect("file");
        held.try_lock().expect("the first writer's lock");
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        let next = File::open(&path).expect("file");
        assert!(lock_soon(&next).is_ok(), "taken once the first let go");
        letting_go.join().expect("thread");
        let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
    }

    #[test]
    fn a_lock_kept_is_refused_after_the_wait() {
        let path = scratch("kept");
        let held = File::create(&path).expect("file");
        held.try_lock().expect("the first writer's lock");
        let next = File::open(&path).expect("file");
        let started = Instant::now();
        assert!(matches!(
            lock_soon(&next),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        assert!(started.elapsed() >= LOCK_WAIT);
        drop(held);
        let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
    }
}
