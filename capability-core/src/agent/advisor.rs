//! The registration gate: an advisor agent binds read-only tools only.

use std::fmt;

use super::{AgentSpec, Target};
use crate::manifest::{HintKind, HintSource};

/// Rejects an advisor agent (research, selection, analysis) that binds any tool whose effective
/// `read_only` is false, and names every such tool with the reason. Operators pass.
///
/// This is the run-time twin of `#[advisor_agent]`'s compile-time gate, for agents assembled at
/// run time ([`AgentSpec::builder`]) and for tools the compiler never saw (MCP tools, plugins).
/// [`Registry::persist_spec`](crate::Registry::persist_spec) and
/// [`Registry::from_inventory`](crate::Registry::from_inventory) call it.
///
/// ```
/// use capability::{assert_advisor_only, AgentSpec, CapabilityManifest, Target};
///
/// let read = CapabilityManifest::builder("list_pods").read_only(true).build()?;
/// let write = CapabilityManifest::builder("restart_pod").build()?;
/// let spec = AgentSpec::builder("analyst")
///     .target(Target::Analysis)
///     .tool(read)
///     .tool(write)
///     .build()?;
/// let violation = assert_advisor_only(&spec).unwrap_err();
/// assert_eq!(violation.offenders().len(), 1);
/// assert!(violation.to_string().contains("`restart_pod`"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn assert_advisor_only(spec: &AgentSpec) -> Result<(), AdvisorViolation> {
    if !spec.is_advisor() {
        return Ok(());
    }
    let offenders: Vec<Offender> = spec
        .tools()
        .iter()
        .filter(|tool| !tool.read_only())
        .map(|tool| {
            let hint = tool.hint(HintKind::ReadOnly);
            let reason = match hint.source() {
                HintSource::Declared => MutatingReason::DeclaredMutating,
                HintSource::Asserted => MutatingReason::AssertedMutating,
                HintSource::TrustedClaim | HintSource::PinnedClaim => {
                    MutatingReason::ClaimedMutating
                }
                HintSource::UntrustedClaim => MutatingReason::UntrustedClaim {
                    claimed_read_only: hint.stated() == Some(true),
                },
                HintSource::Defaulted => MutatingReason::Defaulted,
            };
            Offender {
                tool: tool.qualified_name(),
                reason,
            }
        })
        .collect();
    if offenders.is_empty() {
        Ok(())
    } else {
        Err(AdvisorViolation {
            agent: spec.name().to_owned(),
            target: spec.target(),
            offenders,
        })
    }
}

/// An advisor agent binds tools that are not read-only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvisorViolation {
    agent: String,
    target: Target,
    offenders: Vec<Offender>,
}

impl AdvisorViolation {
    /// The agent's name.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The agent's target.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Every offending tool, in the order the spec binds them.
    pub fn offenders(&self) -> &[Offender] {
        &self.offenders
    }
}

/// One tool an advisor may not bind, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offender {
    tool: String,
    reason: MutatingReason,
}

impl Offender {
    /// The tool, as `provider/name` (or its name when it has no provider).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Why it counts as mutating.
    pub fn reason(&self) -> MutatingReason {
        self.reason
    }
}

/// Why a tool's effective `read_only` is false.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MutatingReason {
    /// Its code declares it not read-only.
    DeclaredMutating,
    /// An operator asserted it not read-only.
    AssertedMutating,
    /// Its trusted server says it is not read-only.
    ClaimedMutating,
    /// Its server is untrusted, so its claim is not believed.
    UntrustedClaim {
        /// Whether the server claimed the tool read-only.
        claimed_read_only: bool,
    },
    /// Nobody said it is read-only: the MCP default is not read-only.
    Defaulted,
}

impl fmt::Display for MutatingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MutatingReason::DeclaredMutating => "declared mutating",
            MutatingReason::AssertedMutating => "asserted mutating by an operator",
            MutatingReason::ClaimedMutating => "its trusted server says it is not read-only",
            MutatingReason::UntrustedClaim {
                claimed_read_only: true,
            } => {
                "its server claims read-only, but the server is untrusted \
                 (an operator can assert the tool read-only)"
            }
            MutatingReason::UntrustedClaim {
                claimed_read_only: false,
            } => "its server is untrusted and does not claim read-only",
            MutatingReason::Defaulted => {
                "nothing says it is read-only, so it counts as mutating (the MCP default)"
            }
        })
    }
}

impl fmt::Display for AdvisorViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "advisor agent `{}` ({}) binds {} that {} not read-only:",
            self.agent,
            self.target,
            if self.offenders.len() == 1 {
                "a tool".to_owned()
            } else {
                format!("{} tools", self.offenders.len())
            },
            if self.offenders.len() == 1 {
                "is"
            } else {
                "are"
            },
        )?;
        for offender in &self.offenders {
            write!(f, "\n  - `{}`: {}", offender.tool, offender.reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for AdvisorViolation {}
