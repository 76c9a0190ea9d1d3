//! What agents do with tools: an advisor runs read-only tools and proposes the rest; a mutating
//! tool executes only with an approved proposal.

use capability_core::agent::{AdvisorBound, AdvisorViolation, assert_advisor_only};
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

/// What an advisor agent can do with tools: run the read-only tools it binds and propose the
/// rest. It has no way to execute a mutating tool.
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
///
/// Nor can it run a read-only tool its attribute does not bind:
///
/// ```compile_fail,E0277
/// # use capability::{advisor_agent, AdvisorSession, Capability, Run};
/// /// List nodes.
/// #[derive(Capability)]
/// #[capability(read_only)]
/// struct ListNodes;
/// impl Run for ListNodes { type Output = (); fn run(self) {} }
/// #[advisor_agent(tools())]
/// struct Analyst;
/// let session = AdvisorSession::<Analyst>::new().unwrap();
/// session.run(ListNodes); // `Analyst` does not bind `ListNodes`
/// ```
pub struct AdvisorSession<A: Agent> {
    agent: std::marker::PhantomData<fn() -> A>,
}

impl<A: Agent> std::fmt::Debug for AdvisorSession<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdvisorSession")
            .field("agent", &A::spec().name())
            .finish()
    }
}

impl<A: Agent> AdvisorSession<A> {
    /// A session for advisor `A`.
    ///
    /// Checks the advisor rule again on the manifests `A`'s tools report at run time, so an
    /// agent whose `impl Agent` is hand-written, or a tool whose hand-written `impl Capability`
    /// says `READ_ONLY` while its manifest says otherwise, is refused here, before anything runs.
    pub fn new() -> Result<Self, SessionError> {
        let spec = A::spec();
        if !spec.is_advisor() {
            return Err(SessionError::NotAdvisor {
                agent: spec.name().to_owned(),
            });
        }
        assert_advisor_only(spec).map_err(SessionError::Violation)?;
        Ok(AdvisorSession {
            agent: std::marker::PhantomData,
        })
    }

    /// Runs a read-only tool that `A` binds.
    ///
    /// Refused, without running, when the tool's manifest does not say read-only (a hand-written
    /// `impl Capability` whose `READ_ONLY` disagrees with its manifest).
    pub fn run<T>(&self, tool: T) -> Result<T::Output, SessionError>
    where
        T: Run + AdvisorBound<A>,
    {
        // Evaluating the proofs makes a forged one (made for a mutating tool) a build error.
        const {
            let _ = <T as ReadOnlyTool>::READ_ONLY_PROOF;
            let _ = <T as AdvisorBound<A>>::BINDING;
        }
        let manifest = T::manifest();
        if !manifest.read_only() {
            return Err(SessionError::NotReadOnly {
                tool: manifest.qualified_name(),
            });
        }
        // And the agent's own spec must bind it: whatever proof compiled, a tool runs only if
        // the list the agent reports holds it (its name and descriptor).
        let bound = A::spec().tools().iter().any(|t| {
            t.qualified_name() == manifest.qualified_name()
                && t.descriptor_hash() == manifest.descriptor_hash()
        });
        if !bound {
            return Err(SessionError::NotBound {
                tool: manifest.qualified_name(),
                agent: A::spec().name().to_owned(),
            });
        }
        Ok(tool.run())
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

/// Why an advisor session was refused, or a tool was not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionError {
    /// The agent is an operator, not an advisor.
    NotAdvisor {
        /// The agent.
        agent: String,
    },
    /// The agent's tools, as their manifests report them at run time, break the advisor rule.
    Violation(AdvisorViolation),
    /// The tool's `READ_ONLY` says read-only but its manifest does not: it was not run.
    NotReadOnly {
        /// The tool, as `provider/name`.
        tool: String,
    },
    /// The agent's spec does not list the tool: it was not run.
    NotBound {
        /// The tool, as `provider/name`.
        tool: String,
        /// The agent.
        agent: String,
    },
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::NotAdvisor { agent } => write!(
                f,
                "agent `{agent}` is an operator: an advisor session is for advisor agents"
            ),
            SessionError::Violation(violation) => violation.fmt(f),
            SessionError::NotBound { tool, agent } => write!(
                f,
                "tool `{tool}` was not run: agent `{agent}` does not bind it"
            ),
            SessionError::NotReadOnly { tool } => write!(
                f,
                "tool `{tool}` was not run: its type says read-only (`READ_ONLY = true`) but its \
                 manifest does not"
            ),
        }
    }
}

impl std::error::Error for SessionError {}
