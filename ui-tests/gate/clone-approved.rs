use capability::{Approved, Capability};

/// Restart a pod.
#[derive(Capability, Clone)]
#[capability(destructive)]
struct RestartPod;

// `Approved<T>` is not `Clone` even when `T` is: an approval is used once.
fn run_twice(approved: Approved<RestartPod>) -> (Approved<RestartPod>, Approved<RestartPod>) {
    (approved.clone(), approved)
}

fn main() {}
