// Every proof forged with the library's own functions, lying about `READ_ONLY`: the binding
// cannot even be made (its gate function needs the agent's binding token, which only the
// attribute can make), and nothing runs.
use capability::__private::{bind_advisor_tool, AdvisorBinding, ReadOnlyProof};
use capability::agent::AdvisorBound;
use capability::{advisor_agent, AdvisorSession, Capability, ReadOnlyTool, Run};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

impl ReadOnlyTool for RestartPod {
    const READ_ONLY_PROOF: ReadOnlyProof<Self> = ReadOnlyProof::new();
}

impl Run for RestartPod {
    type Output = ();
    fn run(self) {}
}

#[advisor_agent(tools(), target = "analysis")]
struct Analyst;

impl AdvisorBound<Analyst> for RestartPod {
    const BINDING: AdvisorBinding<RestartPod, Analyst> =
        bind_advisor_tool::<RestartPod, Analyst, true>();
}

fn main() {
    if let Ok(session) = AdvisorSession::<Analyst>::new() {
        let _ = session.run(RestartPod);
    }
}
