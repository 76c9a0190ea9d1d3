use capability::{Approved, Capability};

/// Restart a pod.
#[derive(Capability, serde::Deserialize)]
#[capability(destructive)]
struct RestartPod;

// An `Approved` cannot come from a file either.
fn from_file(text: &str) -> Approved<RestartPod> {
    serde_json::from_str(text).unwrap()
}

fn main() {}
