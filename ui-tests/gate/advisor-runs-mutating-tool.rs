use capability::{advisor_agent, AdvisorSession, Approved, Capability, Execute};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

impl Execute for RestartPod {
    type Output = ();
    fn execute(_approved: Approved<Self>) {}
}

#[advisor_agent(tools(), target = "analysis")]
struct Analyst;

fn main() {
    if let Ok(session) = AdvisorSession::<Analyst>::new() {
        let _ = session.run(RestartPod);
    }
}
