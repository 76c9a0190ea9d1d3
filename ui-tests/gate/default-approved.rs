use capability::{Approved, Capability};

/// Restart a pod.
#[derive(Capability, Default)]
#[capability(destructive)]
struct RestartPod;

fn main() {
    let _approved: Approved<RestartPod> = Default::default();
}
