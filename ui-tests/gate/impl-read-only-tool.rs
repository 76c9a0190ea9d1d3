// Declaring a mutating tool read-only by hand, to make it `Run`.
use capability::{Capability, ReadOnlyTool};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

impl ReadOnlyTool for RestartPod {}

fn main() {}
