//! Acceptance, the gate on a SQLite store, across real OS processes: an approval executes once
//! when 8 processes race for it and when a process restarts; a revocation in one process denies
//! the next decision in another; a store that cannot be reached refuses.
//!
//! The child processes are this test binary, run again with an environment variable naming
//! their part (as `capability-audit/tests/it/audit.rs` of the workspace does).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capability::audit::{AuditedDispatch, Budget, Caller, MemorySink, Outcome};
use capability::authz::{Assertions, Ceiling, DenyReason};
use capability::gate::{
    Approval, AuthorityGrant, GateError, PublicKey, RevocationStore, SecretKey, SystemClock,
};
use capability::{Approved, Capability, CapabilityManifest, Execute, Proposal, WriteGate};
use capability_store::Store;
use capability_store::sqlite::SqliteStore;
use serde_json::json;

/// Restart a pod.
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

const AUDIENCE: &str = "prod-eu";
const CHILD: &str = "CAPABILITY_STORE_GATE_CHILD";

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sqlite-gate");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm", ".approval", ".go"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn proposal() -> Proposal<RestartPod> {
    let pod = RestartPod {
        namespace: "checkout".into(),
        name: "api-0".into(),
    };
    Proposal::new(pod, "analyst", "api-0 is wedged").expect("proposal")
}

fn gate(store: &SqliteStore, approver: PublicKey) -> WriteGate {
    WriteGate::new(AUDIENCE, store.ledger()).approver("alice", approver)
}

/// What one child process did with the approval: `EXECUTED ...`, `REPLAY` or `ERROR ...`.
fn approve_once(store: &SqliteStore, approver: PublicKey, approval: &Approval) -> String {
    match gate(store, approver).approve(proposal(), Some(approval)) {
        Ok(approved) => format!("EXECUTED {}", RestartPod::execute(approved)),
        Err(rejected) => match rejected.error {
            GateError::Replay(_) => "REPLAY".to_owned(),
            error => format!("ERROR {error}"),
        },
    }
}

fn child(part: &str, db: &Path, extra: &[(&str, String)]) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command
        .args([
            "--exact",
            "sqlite_gate::child_process",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, part)
        .env("CHILD_DB", db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (name, value) in extra {
        command.env(name, value);
    }
    command
}

fn outcome(output: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|line| line.strip_prefix("OUTCOME: "))
        .unwrap_or_else(|| panic!("the child printed no outcome: {text}"))
        .to_owned()
}

#[test]
fn eight_processes_race_for_one_approval_and_exactly_one_executes() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let db = scratch("replay.db");
    let store = SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    let key = SecretKey::generate().expect("key");
    let approval = Approval::sign(
        proposal().file(),
        "alice",
        AUDIENCE,
        &key,
        now(),
        now() + 600,
    )
    .expect("sign");
    let approval_file = PathBuf::from(format!("{}.approval", db.display()));
    std::fs::write(&approval_file, approval.to_json()).expect("approval");
    let go = PathBuf::from(format!("{}.go", db.display()));
    let extra = [
        ("CHILD_KEY", key.public_key().to_text()),
        ("CHILD_APPROVAL", approval_file.display().to_string()),
        ("CHILD_GO", go.display().to_string()),
    ];
    let children: Vec<_> = (0..8)
        .map(|_| child("replay", &db, &extra).spawn().expect("spawn"))
        .collect();
    // Every child is waiting for the start signal (each says so: `<go>.ready.<pid>`): they
    // approve at once.
    let ready = |pid: u32| PathBuf::from(format!("{}.ready.{pid}", go.display()));
    assert!(
        capability_testkit::wait_for(|| children.iter().all(|c| ready(c.id()).exists())),
        "the children did not all get ready"
    );
    std::fs::write(&go, "go").expect("go");
    let outcomes: Vec<String> = children
        .into_iter()
        .map(|c| outcome(&c.wait_with_output().expect("child")))
        .collect();
    let executed = outcomes
        .iter()
        .filter(|o| o.starts_with("EXECUTED"))
        .count();
    let replays = outcomes.iter().filter(|o| *o == "REPLAY").count();
    assert_eq!((executed, replays), (1, 7), "{outcomes:?}");
    // A restarted process, with a fresh gate on the same file, refuses it too.
    let restarted = SqliteStore::open(&db).expect("reopen");
    assert_eq!(
        approve_once(&restarted, key.public_key(), &approval),
        "REPLAY"
    );
}

#[test]
fn a_revocation_in_one_process_denies_the_next_decision_in_another() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let db = scratch("revoke.db");
    let store = SqliteStore::open(&db).expect("open");
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
        .attenuate("triage-bot", Default::default())
        .expect("attenuated");
    let none = Assertions::none();
    let ctx = sub.context("s-1", revocations.as_ref(), &SystemClock, &none);
    let dispatch =
        AuditedDispatch::new(std::sync::Arc::new(MemorySink::new())).with_budget(Budget {
            max_calls: u32::MAX,
            max_denials: u32::MAX,
        });
    let list = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
        .expect("tool");
    let caller = Caller::new("triage-bot");
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || Ok(1));
    assert!(matches!(out, Outcome::Done(1)));
    // Process A revokes the root grant.
    let output = child("revoke", &db, &[("CHILD_GRANT", root.id().to_owned())])
        .output()
        .expect("child");
    assert_eq!(outcome(&output), "REVOKED");
    // This process's next decision, with the same context, is a denial.
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || Ok(2));
    let Outcome::Denied(denial) = out else {
        panic!("a revoked grant was believed")
    };
    assert!(
        denial.reasons().contains(&DenyReason::Revoked {
            grant: root.id().to_owned()
        }),
        "{denial:?}"
    );
}

#[test]
fn a_locked_ledger_refuses_the_approval_without_using_it_up() {
    let db = scratch("locked.db");
    SqliteStore::open(&db)
        .expect("open")
        .migrate()
        .expect("migrate");
    let store = SqliteStore::open_with_timeout(&db, Duration::from_millis(50)).expect("open");
    let key = SecretKey::generate().expect("key");
    let approval = Approval::sign(
        proposal().file(),
        "alice",
        AUDIENCE,
        &key,
        now(),
        now() + 600,
    )
    .expect("sign");
    let gate = gate(&store, key.public_key());
    let holder = rusqlite::Connection::open(&db).expect("open");
    holder.execute_batch("BEGIN IMMEDIATE").expect("lock");
    let Err(rejected) = gate.approve(proposal(), Some(&approval)) else {
        panic!("approved while the ledger was unreachable")
    };
    assert!(
        matches!(rejected.error, GateError::LedgerUnavailable(ref e) if e.message.contains("locked")),
        "{}",
        rejected.error
    );
    drop(holder);
    assert!(
        gate.approve(proposal(), Some(&approval)).is_ok(),
        "not used up"
    );
}

#[test]
fn a_corrupt_database_cannot_back_a_gate() {
    let db = scratch("corrupt.db");
    SqliteStore::open(&db)
        .expect("open")
        .migrate()
        .expect("migrate");
    let mut bytes = std::fs::read(&db).expect("read");
    bytes[..16].copy_from_slice(b"garbage garbage!");
    std::fs::write(&db, bytes).expect("corrupt");
    let error = SqliteStore::open(&db).expect_err("a corrupt file");
    assert!(error.message.contains("not a SQLite database"), "{error}");
}

#[test]
fn revocations_that_cannot_be_read_deny_the_grant() {
    let db = scratch("revocations-gone.db");
    let store = SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    let revocations = store.revocations();
    let grant = AuthorityGrant::issue(
        "ops-lead",
        Ceiling::ReadOnly,
        ["k8s:read"],
        "k8s/*",
        u64::MAX,
    )
    .expect("grant");
    let list = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
        .expect("tool");
    assert!(
        grant
            .decide(&list, now(), revocations.as_ref(), &Assertions::none())
            .allowed
    );
    // The table is gone (another process broke the database): nothing can be believed.
    rusqlite::Connection::open(&db)
        .and_then(|c| c.execute_batch("DROP TABLE capability_revocation"))
        .expect("drop");
    assert!(revocations.revoked_among(&[grant.id()]).is_err());
    let decision = grant.decide(&list, now(), revocations.as_ref(), &Assertions::none());
    assert!(!decision.allowed);
    assert!(
        decision
            .reasons
            .iter()
            .any(|r| matches!(r, DenyReason::RevocationsUnavailable { .. })),
        "{decision:?}"
    );
}

#[test]
#[ignore = "run by the tests above as a child process"]
fn child_process() {
    let (Some(part), Some(db)) = (std::env::var(CHILD).ok(), std::env::var_os("CHILD_DB")) else {
        return;
    };
    let store = SqliteStore::open(&db).expect("open");
    let outcome = match part.as_str() {
        "replay" => {
            let key = PublicKey::from_text(&std::env::var("CHILD_KEY").expect("key")).expect("key");
            let text = std::fs::read_to_string(std::env::var("CHILD_APPROVAL").expect("approval"))
                .expect("approval");
            let approval = Approval::from_json(&text).expect("approval");
            let go = std::env::var("CHILD_GO").expect("go");
            let ready = format!("{go}.ready.{}", std::process::id());
            std::fs::write(ready, "").expect("ready");
            while !Path::new(&go).exists() {
                std::thread::sleep(Duration::from_millis(1));
            }
            approve_once(&store, key, &approval)
        }
        "revoke" => {
            let grant = std::env::var("CHILD_GRANT").expect("grant");
            store.revocations().revoke(&grant).expect("revoke");
            "REVOKED".to_owned()
        }
        other => format!("ERROR unknown part {other}"),
    };
    println!("OUTCOME: {outcome}");
}
