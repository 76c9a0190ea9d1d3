use capability::{Approved, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

fn main() {
    // Only the write gate makes an `Approved`.
    let _forged = Approved::<RestartPod> { args: RestartPod, approval_id: String::new(), approver: String::new() };
}
