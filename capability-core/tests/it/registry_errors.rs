//! A registry with duplicates and a lying hand-written tool is refused, with every problem named.

use capability::agent::MutatingReason;
use capability::registry::RegistryProblem;
use capability::{Capability, CapabilityManifest, Registry, advisor_agent, agent};

mod billing {
    /// Export invoices.
    #[derive(capability::Capability)]
    #[capability(read_only)]
    pub struct Export;

    #[capability::agent(tools(Export), name = "twin")]
    pub struct Twin;
}

mod reports {
    /// Export a report.
    #[derive(capability::Capability)]
    #[capability(read_only)]
    pub struct Export;

    #[capability::agent(tools(Export), name = "twin")]
    pub struct Twin;
}

/// A hand-written impl that claims to be read-only while its manifest says it deletes. The
/// compile-time gate trusts `READ_ONLY`; the registry checks the manifest.
struct Liar;

impl Capability for Liar {
    const READ_ONLY: bool = true;

    fn manifest() -> &'static CapabilityManifest {
        toolkit::DeleteUser::manifest()
    }
}

#[advisor_agent(tools(billing::Export, Liar))]
struct Gullible;

#[agent(tools(Liar))]
struct Unbothered;

#[test]
fn every_problem_is_reported_with_its_origin() {
    let error = match Registry::from_inventory() {
        Ok(_) => panic!("an inconsistent registry was accepted"),
        Err(error) => error,
    };
    let problems = error.problems();
    assert_eq!(problems.len(), 3, "{error}");
    assert_eq!(
        problems[0],
        RegistryProblem::DuplicateTool {
            name: "export".into(),
            origins: vec![
                "it::registry_errors::billing".into(),
                "it::registry_errors::reports".into()
            ],
        }
    );
    assert_eq!(
        problems[1],
        RegistryProblem::DuplicateAgent {
            name: "twin".into(),
            origins: vec![
                "it::registry_errors::billing".into(),
                "it::registry_errors::reports".into()
            ],
        }
    );
    let RegistryProblem::AdvisorBindsMutatingTool { origin, violation } = &problems[2] else {
        panic!("expected the advisor problem, got {:?}", problems[2]);
    };
    assert_eq!(origin, "it::registry_errors");
    assert_eq!(violation.agent(), "gullible");
    let offenders: Vec<(&str, MutatingReason)> = violation
        .offenders()
        .iter()
        .map(|o| (o.tool(), o.reason()))
        .collect();
    assert_eq!(
        offenders,
        [("directory/delete_user", MutatingReason::Defaulted)]
    );
    assert_eq!(
        error.to_string(),
        "the tool registry was refused:\n  \
         - 2 tools are named `export`, defined in `it::registry_errors::billing`, \
         `it::registry_errors::reports`; give each a distinct `name = \"..\"`\n  \
         - 2 agents are named `twin`, defined in `it::registry_errors::billing`, \
         `it::registry_errors::reports`; give each a distinct `name = \"..\"`\n  \
         - in `it::registry_errors`: advisor agent `gullible` (research) binds a tool that is not \
         read-only:\n      - `directory/delete_user`: nothing says it is read-only, so it counts as mutating \
         (the MCP default)"
    );
}
