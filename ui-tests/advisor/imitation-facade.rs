// `crate = ".."` pointing at an imitation of the facade whose gate function has no bound.
use capability::{advisor_agent, Capability};

mod fake {
    #[allow(unused_imports)]
    pub use capability::*;
    pub mod __private {
        pub use capability::__private::*;
        pub const fn bind_advisor_tool<T: ?Sized + Capability, A: ?Sized + AdvisorTokens, const R: bool>(
            _token: &A::Token,
        ) -> fn() -> &'static CapabilityManifest {
            T::manifest
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
