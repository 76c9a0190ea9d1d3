//! The gated write path: every reason the gate refuses, and the approval used once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use capability::gate::{Approval, Check, Clock, GateError, ProposalFile, PublicKey, SecretKey};
use capability::{Approved, Capability, CapabilityManifest, Execute, Proposal, WriteGate};
use serde_json::Value;

/// Restart a pod.
#[derive(Capability, serde::Serialize, serde::Deserialize, Clone)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
struct RestartPod {
    namespace: String,
    name: String,
}

/// Scale a deployment.
#[derive(Capability, serde::Serialize, serde::Deserialize)]
#[capability(destructive = false, provider = "k8s", scopes = ["k8s:write"])]
struct Scale {
    deployment: String,
    replicas: u32,
}

impl Execute for RestartPod {
    type Output = String;
    fn execute(approved: Approved<Self>) -> String {
        let pod = approved.into_args();
        format!("restarted {}/{}", pod.namespace, pod.name)
    }
}

#[derive(Clone)]
struct TestClock(Arc<AtomicU64>);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const NOW: u64 = 1_800_000_000;
const AUDIENCE: &str = "prod-eu";

fn pod(name: &str) -> RestartPod {
    RestartPod {
        namespace: "checkout".into(),
        name: name.into(),
    }
}

struct Setup {
    gate: WriteGate,
    key: SecretKey,
    clock: TestClock,
}

fn setup() -> Setup {
    let key = SecretKey::generate().expect("randomness");
    let clock = TestClock(Arc::new(AtomicU64::new(NOW)));
    let gate = WriteGate::new(AUDIENCE)
        .approver("alice", key.public_key())
        .clock(clock.clone());
    Setup { gate, key, clock }
}

fn proposal(name: &str) -> Proposal<RestartPod> {
    Proposal::new(pod(name), "analyst", "api-0 is wedged: 500s since 10:02").expect("serializable")
}

fn sign(setup: &Setup, proposal: &Proposal<RestartPod>) -> Approval {
    sign_file(proposal.file(), &setup.key, NOW + 600)
}

/// Alice's approval of a proposal file for the gate's audience, issued now.
fn sign_file(file: &ProposalFile, key: &SecretKey, expires_at: u64) -> Approval {
    Approval::sign(file, "alice", AUDIENCE, key, NOW, expires_at).expect("signed")
}

fn refusal<T: Capability>(result: Result<Approved<T>, capability::gate::Rejected<T>>) -> GateError {
    match result {
        Ok(_) => panic!("the gate approved"),
        Err(rejected) => rejected.error,
    }
}

#[test]
fn the_whole_path_runs_the_tool_once() {
    let s = setup();
    let p = proposal("api-0");
    assert_eq!(p.file().tool, "restart_pod");
    assert_eq!(
        p.file().descriptor_hash,
        RestartPod::manifest().descriptor_hash()
    );
    let unsigned = s.gate.approve(p, None).expect_err("unsigned");
    assert_eq!(unsigned.error, GateError::Unsigned);
    let p = *unsigned.proposal;
    let approval = sign(&s, &p);
    let approved = s.gate.approve(p, Some(&approval)).expect("approved");
    assert_eq!(approved.approver(), "alice");
    assert_eq!(approved.approval_id(), approval.id);
    assert_eq!(RestartPod::execute(approved), "restarted checkout/api-0");
    // The same approval again: refused.
    let error = refusal(s.gate.approve(proposal("api-0"), Some(&approval)));
    assert_eq!(error, GateError::Replay(approval.id.clone()));
}

#[test]
fn changed_arguments_and_other_tools_are_refused() {
    let s = setup();
    let approval = sign(&s, &proposal("api-0"));
    let error = refusal(s.gate.approve(proposal("api-1"), Some(&approval)));
    assert_eq!(error, GateError::ArgumentsChanged);

    let scale = Proposal::new(
        Scale {
            deployment: "api".into(),
            replicas: 3,
        },
        "analyst",
        "load",
    )
    .expect("ok");
    let error = refusal(s.gate.approve(scale, Some(&approval)));
    assert!(matches!(error, GateError::OtherTool { .. }), "{error}");
}

#[test]
fn a_changed_descriptor_invalidates_the_approval() {
    let s = setup();
    let p = proposal("api-0");
    // An approval made against another version of the tool's descriptor.
    let mut old = p.file().clone();
    old.descriptor_hash = "0".repeat(64);
    let approval = sign_file(&old, &s.key, NOW + 600);
    let error = refusal(s.gate.approve(p, Some(&approval)));
    assert_eq!(error, GateError::DescriptorChanged);
}

#[test]
fn signatures_must_be_an_approvers_and_intact() {
    let s = setup();
    let p = proposal("api-0");
    let mallory = SecretKey::generate().expect("key");
    let forged = sign_file(p.file(), &mallory, NOW + 600);
    assert_eq!(
        refusal(s.gate.approve(proposal("api-0"), Some(&forged))),
        GateError::BadSignature("alice".into())
    );
    let stranger =
        Approval::sign(p.file(), "mallory", AUDIENCE, &mallory, NOW, NOW + 600).expect("signed");
    assert_eq!(
        refusal(s.gate.approve(proposal("api-0"), Some(&stranger))),
        GateError::UnknownApprover("mallory".into())
    );
    // Extending the expiry of a real approval breaks its signature.
    let mut extended = sign(&s, &p);
    extended.expires_at += 86_400;
    assert_eq!(
        refusal(s.gate.approve(proposal("api-0"), Some(&extended))),
        GateError::BadSignature("alice".into())
    );
    let mut garbage = sign(&s, &p);
    garbage.signature = "zz".into();
    assert_eq!(
        refusal(s.gate.approve(p, Some(&garbage))),
        GateError::BadSignature("alice".into())
    );
}

#[test]
fn expiry_and_a_clock_set_back() {
    let s = setup();
    let p = proposal("api-0");
    let approval = sign(&s, &p);
    s.clock.0.store(NOW + 600, Ordering::SeqCst);
    let error = refusal(s.gate.approve(p, Some(&approval)));
    assert_eq!(
        error,
        GateError::Expired {
            expired_at: NOW + 600,
            now: NOW + 600
        }
    );
    assert!(error.to_string().contains("expired"));

    // Setting the clock back to make the approval valid again is noticed.
    s.clock.0.store(NOW, Ordering::SeqCst);
    let error = refusal(s.gate.approve(proposal("api-0"), Some(&approval)));
    assert_eq!(
        error,
        GateError::ClockWentBack {
            now: NOW,
            latest: NOW + 600
        }
    );
    // A small step back (NTP) is tolerated.
    s.clock.0.store(NOW + 597, Ordering::SeqCst);
    let p = proposal("api-0");
    let fresh = sign_file(p.file(), &s.key, NOW + 900);
    assert!(s.gate.approve(p, Some(&fresh)).is_ok());
}

struct MaxReplicas(u64);

impl Check for MaxReplicas {
    fn name(&self) -> &str {
        "max-replicas"
    }
    fn check(&self, _tool: &CapabilityManifest, args: &Value) -> Result<(), String> {
        match args.get("replicas").and_then(Value::as_u64) {
            Some(n) if n > self.0 => Err(format!("{n} replicas is over the limit of {}", self.0)),
            _ => Ok(()),
        }
    }
}

struct DryRun;

impl Check for DryRun {
    fn name(&self) -> &str {
        "dry-run"
    }
    fn check(&self, _tool: &CapabilityManifest, args: &Value) -> Result<(), String> {
        if args.get("deployment").and_then(Value::as_str) == Some("missing") {
            Err("deployment `missing` not found".into())
        } else {
            Ok(())
        }
    }
}

#[test]
fn validation_and_preflight_must_pass_first() {
    let key = SecretKey::generate().expect("key");
    let gate = WriteGate::new(AUDIENCE)
        .approver("alice", key.public_key())
        .clock(TestClock(Arc::new(AtomicU64::new(NOW))))
        .validator(MaxReplicas(10))
        .preflight(DryRun);
    let scale = |deployment: &str, replicas| {
        Proposal::new(
            Scale {
                deployment: deployment.into(),
                replicas,
            },
            "analyst",
            "load",
        )
        .expect("ok")
    };
    let sign = |p: &Proposal<Scale>| sign_file(p.file(), &key, NOW + 60);

    let p = scale("api", 50);
    let a = sign(&p);
    let error = refusal(gate.approve(p, Some(&a)));
    assert_eq!(
        error.to_string(),
        "not approved: validation check `max-replicas` refused: 50 replicas is over the limit of 10"
    );
    let p = scale("missing", 3);
    let a = sign(&p);
    let error = refusal(gate.approve(p, Some(&a)));
    assert!(
        matches!(
            error,
            GateError::CheckFailed {
                kind: "preflight",
                ..
            }
        ),
        "{error}"
    );
    let p = scale("api", 3);
    let a = sign(&p);
    assert!(gate.approve(p, Some(&a)).is_ok());
}

#[test]
fn files_round_trip_and_bad_files_are_refused() {
    let s = setup();
    let p = proposal("api-0");
    let text = p.to_json();
    let file = ProposalFile::from_json(&text).expect("reads back");
    assert_eq!(&file, p.file());

    let mut edited: Value = serde_json::from_str(&text).expect("json");
    edited["args"]["name"] = "api-9".into();
    let error = ProposalFile::from_json(&edited.to_string()).expect_err("edited");
    assert!(
        error
            .to_string()
            .contains("`args_digest` does not match `args`"),
        "{error}"
    );
    let error = ProposalFile::from_json("{ nope").expect_err("malformed");
    assert!(
        error
            .to_string()
            .starts_with("cannot read the proposal file"),
        "{error}"
    );

    let approval = sign_file(&file, &s.key, NOW + 60);
    assert_eq!(
        Approval::from_json(&approval.to_json()).expect("reads back"),
        approval
    );
    assert!(Approval::from_json("[]").is_err());

    let key = SecretKey::from_text(&s.key.to_text()).expect("reads back");
    assert_eq!(key.public_key(), s.key.public_key());
    let public = PublicKey::from_text(&s.key.public_key().to_text()).expect("reads");
    assert_eq!(public, s.key.public_key());
    assert!(SecretKey::from_text("1234").is_err());
    assert!(PublicKey::from_text("not hex").is_err());
}

#[test]
fn key_files_are_64_hex_digits_and_bad_ones_are_refused() {
    let s = setup();
    let text = s.key.to_text();
    let digits = text.strip_suffix('\n').expect("ends with a newline");
    assert_eq!(digits.len(), 64);
    assert!(
        digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    // A file a person edited: capitals and white space around the digits still read.
    let edited = format!("  {}\r\n", digits.to_uppercase());
    let key = SecretKey::from_text(&edited).expect("capitals and white space");
    assert_eq!(key.public_key(), s.key.public_key());
    let public = s.key.public_key().to_text();
    assert_eq!(public.trim_end(), s.key.public_key().to_string());
    assert_ne!(public, text, "the public key file is not the secret one");

    for bad in [
        "",
        "00",
        &digits[..63],
        &format!("{digits}0"),
        &format!("{digits}00"),
    ] {
        let error = SecretKey::from_text(bad).expect_err("too short or too long");
        assert!(error.to_string().contains("64 hex digits"), "{error}");
        assert!(PublicKey::from_text(bad).is_err(), "{bad:?}");
    }
    let mut not_hex = digits.to_owned();
    not_hex.replace_range(10..11, "g");
    assert!(SecretKey::from_text(&not_hex).is_err());
    assert!(PublicKey::from_text(&not_hex).is_err());
    // A two-byte character where two digits should be: refused, no panic.
    let mut accented = digits.to_owned();
    accented.replace_range(0..2, "é");
    assert!(SecretKey::from_text(&accented).is_err());
    assert!(PublicKey::from_text(&accented).is_err());
    // The secret never shows in debug output.
    assert!(!format!("{:?}", s.key).contains(digits));
}

#[test]
fn a_weak_public_key_is_refused() {
    // The identity point: with it as an approver's key, an approval with R = identity and
    // s = 0 would pass a lax check for any proposal. An edited `.pub` file must not get there.
    let identity = format!("01{}", "00".repeat(31));
    let error = PublicKey::from_text(&identity).expect_err("a weak key");
    assert!(error.to_string().contains("weak"), "{error}");
}
