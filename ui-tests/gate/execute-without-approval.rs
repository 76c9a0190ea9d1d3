use capability::{Approved, Capability, Execute};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod {
    name: String,
}

impl Execute for RestartPod {
    type Output = String;
    fn execute(approved: Approved<Self>) -> String {
        format!("restarted {}", approved.into_args().name)
    }
}

fn main() {
    let _ = RestartPod::execute(RestartPod { name: "api-0".into() });
}
