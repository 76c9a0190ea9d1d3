//! The write gate and authority grants on PostgreSQL, across OS processes: eight processes race
//! to use one approval and exactly one executes (a restarted process refuses it too); a grant
//! revoked in one process is denied at the next decision of another.
//!
//! The children are this test binary run again with `CAPABILITY_PG_CHILD` set: `child` does
//! their part and prints one `RESULT` line.

use capability_testkit::pg;

use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capability::audit::{AuditedDispatch, Budget, Caller, MemorySink, Outcome};
use capability::authz::{Assertions, Ceiling, DenyReason};
use capability::gate::{Approval, Attenuation, AuthorityGrant, PublicKey, SecretKey, SystemClock};
use capability::{Approved, Capability, CapabilityManifest, Execute, Proposal, WriteGate};
use capability_store::Store;
use capability_store::postgres::PgStore;
use serde_json::json;

const CHILD: &str = "CAPABILITY_PG_CHILD";
const AUDIENCE: &str = "prod-eu";

/// Restart a pod.
#[derive(Capability, serde::Serialize, serde::Deserialize, Clone)]
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

fn proposal() -> Proposal<RestartPod> {
    let pod = RestartPod {
        namespace: "checkout".into(),
        name: "api-0".into(),
    };
    Proposal::new(pod, "analyst", "api-0 is wedged").expect("serializable")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// This binary's `child` test, as a child process with `vars`.
fn spawn_child(vars: &[(&str, &str)]) -> std::process::Child {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command.args([
        "--exact",
        "pg_gate::child",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (name, value) in vars {
        command.env(name, value);
    }
    command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn child")
}

/// The child's `RESULT` line.
fn result(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}");
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no RESULT from the child: {stdout}"))
        .to_owned()
}

/// The children's side.
#[test]
fn child() {
    let Ok(role) = std::env::var(CHILD) else {
        return;
    };
    let store = PgStore::connect(&env("PG_URL")).expect("connect");
    match role.as_str() {
        "approve" => {
            let key = PublicKey::from_text(&env("PG_KEY")).expect("key");
            let approval: Approval = serde_json::from_str(&env("PG_APPROVAL")).expect("approval");
            let gate = WriteGate::new(AUDIENCE, store.ledger()).approver("alice", key);
            // Start together: wait for the moment the parent chose.
            let start: u128 = env("PG_START_MS").parse().expect("start");
            while SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
                < start
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            match gate.approve(proposal(), Some(&approval)) {
                Ok(approved) => println!("RESULT executed: {}", RestartPod::execute(approved)),
                Err(rejected) => println!("RESULT refused: {}", rejected.error),
            }
        }
        "revoke" => {
            store
                .revocations()
                .revoke(&env("PG_GRANT"))
                .expect("revoke");
            println!("RESULT revoked");
        }
        other => panic!("unknown child role {other}"),
    }
}

#[test]
fn eight_processes_race_for_one_approval_and_one_executes() {
    let Some(url) = pg::schema_url("replay") else {
        return;
    };
    PgStore::connect(&url)
        .expect("connect")
        .migrate()
        .expect("migrate");
    let key = SecretKey::generate().expect("randomness");
    let issued = now();
    let approval = Approval::sign(
        proposal().file(),
        "alice",
        AUDIENCE,
        &key,
        issued,
        issued + 600,
    )
    .expect("signed");
    let approval = serde_json::to_string(&approval).expect("json");
    let public = key.public_key().to_text();
    let start = (SystemTime::now().duration_since(UNIX_EPOCH).expect("clock")
        + Duration::from_secs(2))
    .as_millis()
    .to_string();
    let vars = [
        (CHILD, "approve"),
        ("PG_URL", url.as_str()),
        ("PG_KEY", public.as_str()),
        ("PG_APPROVAL", approval.as_str()),
        ("PG_START_MS", start.as_str()),
    ];
    let children: Vec<_> = (0..8).map(|_| spawn_child(&vars)).collect();
    let results: Vec<String> = children
        .into_iter()
        .map(|c| result(c.wait_with_output().expect("child")))
        .collect();
    let executed: Vec<_> = results
        .iter()
        .filter(|r| r.starts_with("executed"))
        .collect();
    assert_eq!(executed.len(), 1, "{results:#?}");
    assert_eq!(executed[0], "executed: restarted checkout/api-0");
    for refused in results.iter().filter(|r| !r.starts_with("executed")) {
        assert!(refused.contains("(replay)"), "{refused}");
    }

    // A process started afterwards (a restart, another replica) refuses it too.
    let late = result(spawn_child(&vars).wait_with_output().expect("child"));
    assert!(
        late.starts_with("refused") && late.contains("(replay)"),
        "{late}"
    );
}

#[test]
fn a_grant_revoked_in_one_process_is_denied_at_the_next_decision_of_another() {
    let Some(url) = pg::schema_url("revocation") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let revocations = store.revocations();
    let root = AuthorityGrant::issue(
        "ops-lead",
        Ceiling::ReadOnly,
        ["k8s:read"],
        "k8s/*",
        u64::MAX,
    )
    .expect("grant");
    let sub = root
        .attenuate("triage-bot", Attenuation::default())
        .expect("attenuated");
    let none = Assertions::none();
    let ctx = sub.context("session-1", &*revocations, &SystemClock, &none);
    let dispatch =
        AuditedDispatch::new(std::sync::Arc::new(MemorySink::new())).with_budget(Budget {
            max_calls: 100,
            max_denials: 10,
        });
    let list = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
        .expect("manifest");
    let caller = Caller::new("triage-bot");
    let call =
        || -> Outcome<u32, String> { dispatch.call(&ctx, caller, &list, &json!({}), || Ok(3)) };
    assert!(matches!(call(), Outcome::Done(3)));

    // Process A revokes the root grant; this process's next decision is a denial.
    let vars = [
        (CHILD, "revoke"),
        ("PG_URL", url.as_str()),
        ("PG_GRANT", root.id()),
    ];
    assert_eq!(
        result(spawn_child(&vars).wait_with_output().expect("child")),
        "revoked"
    );
    match call() {
        Outcome::Denied(denial) => assert!(
            denial
                .reasons()
                .iter()
                .any(|r| matches!(r, DenyReason::Revoked { grant } if grant == root.id())),
            "{denial}"
        ),
        other => panic!("not denied: {}", describe(&other)),
    }
}

fn describe(outcome: &Outcome<u32, String>) -> &'static str {
    match outcome {
        Outcome::Done(_) => "done",
        Outcome::Failed(_) => "failed",
        Outcome::Denied(_) => "denied",
        Outcome::Degrade(_) => "degraded",
        Outcome::AuditFailed(_) => "audit failed",
    }
}
