// An imitation facade that calls the real gate function, claiming every tool is read-only.
use capability::{advisor_agent, Capability};

mod fake {
    #[allow(unused_imports)]
    pub use capability::*;
    pub mod __private {
        pub use capability::__private::*;
        pub const fn bind_advisor_tool<T, A, const R: bool>(token: &A::Token) -> AdvisorBinding<T, A>
        where
            T: ?Sized + capability::agent::AdvisorBindable<A, true>,
            A: ?Sized + AdvisorTokens,
        {
            capability::__private::bind_advisor_tool::<T, A, true>(token)
        }
    }
}

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

#[advisor_agent(tools(RestartPod), target = "analysis", crate = "crate::fake")]
struct Analyst;

fn main() {}
