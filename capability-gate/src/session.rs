//! What agents do with tools: an advisor runs read-only tools and proposes the rest; a mutating
//! tool executes only with an approved proposal.

use capability_core::{Agent, Capability, ReadOnlyTool};

use crate::error::GateError;
use crate::gate::Approved;
use crate::proposal::Proposal;

/// A mutating tool: it runs only with an [`Approved`] proposal, taken by value (so once).
///
/// ```compile_fail,E0308
/// # use capability::{Approved, Capability, Execute};
/// #[derive(Capability)]
/// #[capability(destructive)]
/// struct RestartPod;
/// impl Execute for RestartPod {
///     type Output = ();
///     fn execute(approved: Approved<Self>) {}
/// }
/// RestartPod::execute(RestartPod); // not approved: does not compile
/// ```
pub trait Execute: Capability + Sized {
    /// What it returns.
    type Output;
    /// Runs the tool.
    fn execute(approved: Approved<Self>) -> Self::Output;
}

/// A read-only tool: runs without approval.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be run directly: only read-only tools that implement `Run` can",
    label = "not a `Run` tool",
    note = "a mutating tool runs only through `Execute::execute`, with a proposal the `WriteGate` approved: propose it with `session.propose(..)`",
    note = "a read-only tool (`#[capability(read_only)]`) runs directly once it implements `Run`"
)]
pub trait Run: ReadOnlyTool + Sized {
    /// What it returns.
    type Output;
    /// Runs the tool.
    fn run(self) -> Self::Output;
}

/// What an advisor agent can do with tools: run read-only ones and propose the rest. It has no
/// way to execute a mutating tool.
///
/// ```compile_fail,E0277
/// # use capability::{advisor_agent, AdvisorSession, Approved, Capability, Execute, Run};
/// #[derive(Capability)]
/// #[capability(destructive)]
/// struct RestartPod;
/// impl Execute for RestartPod { type Output = (); fn execute(_: Approved<Self>) {} }
/// #[advisor_agent(tools())]
/// struct Analyst;
/// let session = AdvisorSession::<Analyst>::new().unwrap();
/// session.run(RestartPod); // `RestartPod` is not a read-only tool
/// ```
pub struct AdvisorSession<A: Agent> {
    agent: std::marker::PhantomData<fn() -> A>,
}

impl<A: Agent> AdvisorSession<A> {
    /// A session for advisor `A`; `None` when `A` is not an advisor.
    pub fn new() -> Option<Self> {
        A::spec().is_advisor().then_some(AdvisorSession {
            agent: std::marker::PhantomData,
        })
    }

    /// Runs a read-only tool.
    pub fn run<T: Run>(&self, tool: T) -> T::Output {
        tool.run()
    }

    /// Proposes a mutating tool's call, for the gate.
    pub fn propose<T: Capability + serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        args: T,
        rationale: impl Into<String>,
    ) -> Result<Proposal<T>, GateError> {
        Proposal::new(args, A::spec().name(), rationale)
    }
}
