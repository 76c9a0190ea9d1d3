//! The thread that renews a held lease while its loop runs, every third of the TTL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Lease, LeaseStore, WallClock, millis};

/// A running renewal.
pub(super) struct Renewer {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
    lost: Arc<AtomicBool>,
}

impl Renewer {
    pub(super) fn start(
        leases: Arc<dyn LeaseStore>,
        clock: Arc<dyn WallClock>,
        lease: Lease,
        ttl: Duration,
    ) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let period = (ttl / 3).max(Duration::from_millis(10));
        let thread = std::thread::Builder::new()
            .name("capability-lease".to_owned())
            .spawn(move || {
                let mut expires = lease.expires_ms;
                loop {
                    match stopped.recv_timeout(period) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                    let now = clock.now_ms();
                    match leases.renew(&lease, now, millis(ttl)) {
                        Ok(true) => expires = now.saturating_add(millis(ttl)),
                        Ok(false) => {
                            flag.store(true, Ordering::SeqCst);
                            return;
                        }
                        // The store did not answer: try again; once the lease may have lapsed,
                        // another holder may run, and this one counts it lost.
                        Err(_) if now >= expires => {
                            flag.store(true, Ordering::SeqCst);
                            return;
                        }
                        Err(_) => {}
                    }
                }
            })
            .ok();
        if thread.is_none() {
            // No thread, no renewals: the lease lapses after its TTL, so say so at the end.
            lost.store(true, Ordering::SeqCst);
        }
        Renewer { stop, thread, lost }
    }

    pub(super) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(super) fn stop(mut self) {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
