//! The one gated write path, end to end, with a real key pair: an analyst proposes a change,
//! the gate (made for one audience, `prod-eu`) refuses it unsigned, a human reviews and signs it
//! for that audience, the gate approves, the tool runs once with exactly the signed arguments,
//! and the replay and an approval for another audience fail.
//!
//! ```text
//! cargo run --example write_path
//! ```
//!
//! The human's step is what `capability approve` does; the example prints the command. On a
//! terminal `capability approve` shows the proposal and asks `sign this approval? [y/N]`; a
//! script (no terminal) must pass `--yes`, which says the human reviewed the file another way.

use std::process::ExitCode;

use capability::gate::{Approval, MemoryLedger, ProposalFile, SecretKey};
use capability::{AdvisorSession, Approved, Capability, Execute, Run, WriteGate, advisor_agent};

/// List the pods of a namespace.
#[derive(Capability, serde::Serialize)]
#[capability(read_only, provider = "k8s", scopes = ["k8s:read"])]
struct ListPods {
    namespace: String,
}

impl Run for ListPods {
    type Output = Vec<String>;
    fn run(self) -> Vec<String> {
        vec![
            format!("{}/api-0 CrashLoopBackOff", self.namespace),
            format!("{}/api-1 Running", self.namespace),
        ]
    }
}

/// Restart a pod: it deletes the pod and its controller starts a new one.
#[derive(Capability, serde::Serialize, serde::Deserialize)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
struct RestartPod {
    namespace: String,
    name: String,
}

impl Execute for RestartPod {
    type Output = String;
    fn execute(approved: Approved<Self>) -> String {
        let pod = approved.into_args();
        format!("restarted {}/{}", pod.namespace, pod.name)
    }
}

#[advisor_agent(tools(ListPods), target = "analysis")]
struct Analyst;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("write_path: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("capability-write-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    // The approver's key pair (`capability keygen --out alice.key`). The gate gets only the
    // public half.
    let key = SecretKey::generate()?;
    std::fs::write(dir.join("alice.key"), key.to_text())?;
    // The gate guards one environment: approvals signed for another audience are refused.
    let gate = WriteGate::new("prod-eu", MemoryLedger::new()).approver("alice", key.public_key());

    // 1. The analyst reads (read-only tools run directly) and proposes a restart.
    let session = AdvisorSession::<Analyst>::new()?;
    let pods = session.run(ListPods {
        namespace: "checkout".into(),
    })?;
    println!("1. analyst reads: {pods:?}");
    let proposal = session
        .propose(
            RestartPod {
                namespace: "checkout".into(),
                name: "api-0".into(),
            },
            "api-0 is in CrashLoopBackOff since 10:02; a restart clears the wedged connection pool",
        )?
        .for_audience("prod-eu");
    let proposal_path = dir.join("proposal.json");
    std::fs::write(&proposal_path, proposal.to_json())?;
    println!("   proposal written to {}", proposal_path.display());

    // 2. The gate refuses it unsigned.
    let rejected = match gate.approve(proposal, None) {
        Ok(_) => return Err("the gate approved an unsigned proposal".into()),
        Err(rejected) => rejected,
    };
    println!("2. gate, unsigned: {}", rejected.error);

    // 3. A human reviews the file and signs it for the gate's audience. On a terminal:
    //    capability approve --key alice.key --approver alice --audience prod-eu \
    //        --expires-in 900 --out approval.json proposal.json
    //    shows tool, type, audience, arguments, rationale, proposer and expiry, then asks
    //    `sign this approval? [y/N]`. From a script, add `--yes` (no terminal to ask on).
    let file = ProposalFile::from_json(&std::fs::read_to_string(&proposal_path)?)?;
    println!(
        "3. alice reviews: `{}` ({}) for `{}`, arguments {}",
        file.tool,
        file.tool_type,
        file.audience.as_deref().unwrap_or("-"),
        file.args
    );
    let secret = SecretKey::from_text(&std::fs::read_to_string(dir.join("alice.key"))?)?;
    let now = capability::gate::Clock::now(&capability::gate::SystemClock);
    let approval = Approval::sign(&file, "alice", "prod-eu", &secret, now, now + 900)?;
    println!(
        "   alice signs approval {} for prod-eu (valid 15 minutes)",
        approval.id
    );

    // 4. The gate approves; the tool runs, once.
    let approved = match gate.approve(*rejected.proposal, Some(&approval)) {
        Ok(approved) => approved,
        Err(rejected) => return Err(rejected.error.into()),
    };
    println!("4. gate: approved by {}", approved.approver());
    println!("   {}", RestartPod::execute(approved));

    // 5. The same approval, replayed on a new proposal: refused.
    let again = session.propose(
        RestartPod {
            namespace: "checkout".into(),
            name: "api-0".into(),
        },
        "once more",
    )?;
    match gate.approve(again, Some(&approval)) {
        Ok(_) => return Err("the gate accepted a replayed approval".into()),
        Err(rejected) => println!("5. replay: {}", rejected.error),
    }

    // 6. The same approval at the staging gate: refused, it was signed for prod-eu.
    let staging =
        WriteGate::new("staging", MemoryLedger::new()).approver("alice", key.public_key());
    let elsewhere = session.propose(
        RestartPod {
            namespace: "checkout".into(),
            name: "api-0".into(),
        },
        "and in staging",
    )?;
    match staging.approve(elsewhere, Some(&approval)) {
        Ok(_) => return Err("the staging gate accepted a prod-eu approval".into()),
        Err(rejected) => println!("6. another audience: {}", rejected.error),
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
