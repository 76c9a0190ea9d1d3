//! A PostgreSQL server that goes away means refusal: the gate refuses the approval (and does not
//! consume it), a grant is denied (`RevocationsUnavailable`), no audited call runs; a record
//! that could not be written is not in the chain, and the dispatcher, which kept it, writes it
//! once the server is back, before the next call runs.

use capability_testkit::pg;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capability::audit::{
    AuditRecord, AuditSink, AuditedDispatch, Budget, Caller, Outcome, Reason, Verdict,
    verify_chains,
};
use capability::authz::{Assertions, Ceiling, DenyReason, ToolContext};
use capability::gate::{Approval, AuthorityGrant, GateError, SecretKey};
use capability::{Approved, Capability, CapabilityManifest, Execute, Proposal, WriteGate};
use capability_store::postgres::PgStore;
use capability_store::{SinkOptions, Store};
use serde_json::json;

/// Restart a pod.
#[derive(Capability, serde::Serialize, serde::Deserialize, Clone)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
struct RestartPod {
    name: String,
}

impl Execute for RestartPod {
    type Output = String;
    fn execute(approved: Approved<Self>) -> String {
        format!("restarted {}", approved.into_args().name)
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[test]
fn an_unreachable_server_means_refusal_and_kept_records_land_after() {
    let Some(server) = pg::own_server("outage") else {
        return;
    };
    let store = PgStore::connect(server.url()).expect("connect");
    store.migrate().expect("migrate");

    let key = SecretKey::generate().expect("randomness");
    let gate = WriteGate::new("prod", store.ledger()).approver("alice", key.public_key());
    let proposal = || {
        Proposal::new(
            RestartPod {
                name: "api-0".into(),
            },
            "analyst",
            "wedged",
        )
        .expect("proposal")
    };
    let approval = Approval::sign(proposal().file(), "alice", "prod", &key, now(), now() + 600)
        .expect("signed");

    let revocations = store.revocations();
    let grant = AuthorityGrant::issue("ops", Ceiling::ReadOnly, ["k8s:read"], "*", u64::MAX)
        .expect("grant");
    let none = Assertions::none();
    let list = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
        .expect("manifest");

    let plain = CapabilityManifest::builder("list_pods")
        .read_only(true)
        .build()
        .expect("manifest");
    let sink = store.audit_sink(SinkOptions::writer("w-1")).expect("sink");
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
        max_calls: 100,
        max_denials: 100,
    });
    let ran = AtomicU32::new(0);
    let ctx = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
    let caller = Caller::new("bot");
    let call = || -> Outcome<u32, String> {
        dispatch.call(&ctx, caller, &plain, &json!({}), || {
            Ok(ran.fetch_add(1, Ordering::SeqCst))
        })
    };
    assert!(
        matches!(call(), Outcome::Done(0)),
        "runs while the server is up"
    );
    assert!(
        grant
            .decision(&list, now(), &*revocations, &none)
            .is_allowed()
    );

    server.stop();
    std::thread::sleep(Duration::from_millis(200));

    // The gate refuses: the ledger cannot be reached.
    let Err(rejected) = gate.approve(proposal(), Some(&approval)) else {
        panic!("approved while the ledger is unreachable");
    };
    assert!(
        matches!(rejected.error, GateError::LedgerUnavailable(_)),
        "{}",
        rejected.error
    );
    // The grant is not believed.
    let decision = grant.decision(&list, now(), &*revocations, &none);
    assert!(
        decision
            .reasons()
            .iter()
            .any(|r| matches!(r, DenyReason::RevocationsUnavailable { .. })),
        "{decision:?}"
    );
    // No audited call runs.
    for _ in 0..3 {
        assert!(
            matches!(call(), Outcome::AuditFailed(_)),
            "refused while the trail is down"
        );
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the tool ran only before the outage"
    );
    // A record appended now fails, and is not in the chain.
    let mut record = AuditRecord {
        writer: String::new(),
        seq: 0,
        time: "2026-03-01T00:00:00.000Z".into(),
        agent: "bot".into(),
        call_id: None,
        phase: None,
        method: None,
        principal: None,
        role: "monitor".into(),
        session: "s-1".into(),
        step: None,
        incident_id: None,
        provider: None,
        tool: "note".into(),
        descriptor_hash: String::new(),
        policy_version: None,
        verdict: Verdict::Denied,
        reasons: vec![Reason::text("test")],
        input: json!({}),
        input_digest: String::new(),
        input_size: 2,
        output_digest: None,
        output_size: None,
        latency_us: None,
        success: None,
        error: None,
        prev: String::new(),
        hash: String::new(),
    };
    assert!(sink.append(record.clone()).is_err());
    assert!(sink.ready().is_err(), "the probe finds the server gone");
    assert_eq!(
        dispatch.kept_records(),
        3,
        "the refused calls' records, kept"
    );

    server.restart().expect("restart");
    sink.ready().expect("the server is back");
    record.tool = "after".into();
    let after = sink.append(record).expect("append");
    assert_eq!(
        after.seq, 3,
        "the failed append is not in the chain: this one follows"
    );
    let approved = gate
        .approve(proposal(), Some(&approval))
        .expect("the approval was not consumed");
    assert_eq!(RestartPod::execute(approved), "restarted api-0");
    // The first call after the outage writes the records kept, then its intent, and runs.
    assert!(matches!(call(), Outcome::Done(1)));
    assert_eq!(dispatch.kept_records(), 0);

    let trail = store.read_trail().expect("trail");
    let report = verify_chains(&trail.records, &trail.checkpoints, None);
    assert!(report.is_intact(), "{report:?}");
    assert!(
        report.writers.iter().all(|w| w.unfinished.is_empty()),
        "{report:?}"
    );
    let tools: Vec<&str> = trail.records.iter().map(|r| r.tool.as_str()).collect();
    // The call before the outage (intent, outcome), the direct append after the restart, the
    // three refused calls' records the dispatcher kept, then the last call (intent, outcome).
    assert_eq!(
        tools,
        [
            "list_pods",
            "list_pods",
            "after",
            "list_pods",
            "list_pods",
            "list_pods",
            "list_pods",
            "list_pods"
        ]
    );
    let refused = trail
        .records
        .iter()
        .filter(|r| r.verdict == Verdict::AuditFailed)
        .count();
    assert_eq!(refused, 3, "each refused call left its record");
    assert!(
        !tools.contains(&"note"),
        "the failed append was never written"
    );
}

#[test]
fn the_records_of_refused_calls_land_before_the_next_call_runs() {
    let Some(server) = pg::own_server("discard") else {
        return;
    };
    let store = PgStore::connect(server.url()).expect("connect");
    store.migrate().expect("migrate");
    let sink: Arc<dyn AuditSink> = store.audit_sink(SinkOptions::writer("w-1")).expect("sink");
    let dispatch = AuditedDispatch::new(sink.clone());
    let ctx = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
    let list = CapabilityManifest::builder("list_pods")
        .read_only(true)
        .build()
        .expect("manifest");
    let caller = Caller::new("bot");
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || Ok(1));
    assert!(out.is_done());
    server.stop();
    std::thread::sleep(Duration::from_millis(200));
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || Ok(2));
    assert!(matches!(out, Outcome::AuditFailed(_)));
    assert_eq!(dispatch.kept_records(), 1, "the refused call's record");
    server.restart().expect("restart");
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || Ok(3));
    assert!(
        matches!(out, Outcome::Done(3)),
        "no first-call-after-failure gap"
    );
    let trail = store.read_trail().expect("trail");
    let verdicts: Vec<(u64, Verdict)> = trail.records.iter().map(|r| (r.seq, r.verdict)).collect();
    assert_eq!(
        verdicts,
        [
            (1, Verdict::Allowed),
            (2, Verdict::Allowed),
            (3, Verdict::AuditFailed),
            (4, Verdict::Allowed),
            (5, Verdict::Allowed)
        ]
    );
    assert!(verify_chains(&trail.records, &[], None).is_intact());
}
