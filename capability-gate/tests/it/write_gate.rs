//! The gated write path: every reason the gate refuses, the approval used once, and the attacks
//! on it (a value changed after signing, arguments JSON cannot carry, another type, another
//! audience, repeated keys, malleated signatures, clocks).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use capability::gate::{
    Approval, CLOCK_TOLERANCE_SECS, Check, Clock, GateError, MAX_VALIDITY_SECS, MemoryLedger,
    ProposalFile, PublicKey, SecretKey,
};
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
    let gate = WriteGate::new(AUDIENCE, MemoryLedger::new())
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
    let gate = WriteGate::new(AUDIENCE, MemoryLedger::new())
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

// ----- Attacks: what executes is what was signed -----

/// A handle the proposer keeps a clone of, as a `RefCell` or `Mutex` field shared with the agent
/// would be: it can be changed after the human signed.
#[derive(Clone, Default)]
struct Shared(Arc<std::sync::Mutex<String>>);

impl Shared {
    fn set(&self, text: &str) {
        *self.0.lock().expect("lock") = text.to_owned();
    }
    fn get(&self) -> String {
        self.0.lock().expect("lock").clone()
    }
}

impl serde::Serialize for Shared {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.get())
    }
}

impl<'de> serde::Deserialize<'de> for Shared {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(deserializer)?;
        Ok(Shared(Arc::new(std::sync::Mutex::new(text))))
    }
}

/// Run a shell command.
#[derive(Capability, serde::Serialize, serde::Deserialize)]
#[capability(destructive)]
struct Shell {
    command: Shared,
}

impl Execute for Shell {
    type Output = String;
    fn execute(approved: Approved<Self>) -> String {
        approved.into_args().command.get()
    }
}

fn approve_and_run<T: Capability + serde::de::DeserializeOwned + Execute>(
    s: &Setup,
    p: Proposal<T>,
) -> T::Output {
    let approval = sign_file(p.file(), &s.key, NOW + 600);
    T::execute(s.gate.approve(p, Some(&approval)).expect("approved"))
}

#[test]
fn a_value_changed_after_signing_never_executes() {
    let s = setup();
    let handle = Shared::default();
    handle.set("ls /srv");
    let p = Proposal::new(
        Shell {
            command: handle.clone(),
        },
        "analyst",
        "list",
    )
    .expect("proposal");
    let approval = sign_file(p.file(), &s.key, NOW + 600);
    handle.set("rm -rf /srv");
    let approved = s.gate.approve(p, Some(&approval)).expect("approved");
    assert_eq!(Shell::execute(approved), "ls /srv", "what was signed runs");
}

/// Set a rate limit.
#[derive(Capability, serde::Serialize, serde::Deserialize, Debug)]
#[capability(destructive = false)]
struct SetLimit {
    ratio: Option<f64>,
    factor: f64,
}

impl Execute for SetLimit {
    type Output = (Option<f64>, f64);
    fn execute(approved: Approved<Self>) -> Self::Output {
        let args = approved.into_args();
        (args.ratio, args.factor)
    }
}

fn unsignable(result: Result<impl std::fmt::Debug, GateError>) -> (String, String) {
    match result.expect_err("refused when proposed") {
        GateError::Unsignable { path, why } => (path, why),
        other => panic!("another error: {other}"),
    }
}

#[test]
fn non_finite_floats_are_refused_not_signed_as_none() {
    let s = setup();
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let (path, why) = unsignable(Proposal::new(
            SetLimit {
                ratio: Some(bad),
                factor: 1.0,
            },
            "analyst",
            "x",
        ));
        assert_eq!(path, "$.ratio", "{why}");
        assert!(why.contains("not a JSON number"), "{why}");
        let (path, _) = unsignable(Proposal::new(
            SetLimit {
                ratio: None,
                factor: bad,
            },
            "analyst",
            "x",
        ));
        assert_eq!(path, "$.factor");
    }
    // `None` itself is fine, and runs as `None`.
    let p = Proposal::new(
        SetLimit {
            ratio: None,
            factor: 2.5,
        },
        "analyst",
        "x",
    )
    .expect("proposal");
    assert_eq!(approve_and_run(&s, p), (None, 2.5));
}

#[test]
fn negative_zero_is_refused_because_canonical_json_writes_zero() {
    let s = setup();
    let (path, why) = unsignable(Proposal::new(
        SetLimit {
            ratio: Some(-0.0),
            factor: 1.0,
        },
        "analyst",
        "x",
    ));
    assert_eq!(path, "$.ratio");
    assert!(why.contains("-0.0"), "{why}");
    let p = Proposal::new(
        SetLimit {
            ratio: Some(0.0),
            factor: 1.0,
        },
        "analyst",
        "x",
    )
    .expect("0.0 is fine");
    let (ratio, _) = approve_and_run(&s, p);
    assert!(ratio.is_some_and(|r| r == 0.0 && r.is_sign_positive()));
}

/// Deploy a release.
#[derive(Capability, serde::Serialize, serde::Deserialize)]
#[capability(destructive)]
struct Deploy {
    release: String,
    #[serde(skip)]
    post_hook: String,
}

impl Execute for Deploy {
    type Output = (String, String);
    fn execute(approved: Approved<Self>) -> Self::Output {
        let args = approved.into_args();
        (args.release, args.post_hook)
    }
}

#[test]
fn a_skipped_field_is_never_executed_from_the_proposal() {
    let s = setup();
    let p = Proposal::new(
        Deploy {
            release: "v2".into(),
            post_hook: "rm -rf /srv".into(),
        },
        "analyst",
        "ship it",
    )
    .expect("proposal");
    assert!(
        !p.to_json().contains("rm -rf"),
        "the reviewer never sees it"
    );
    assert_eq!(
        approve_and_run(&s, p),
        ("v2".to_owned(), String::new()),
        "the skipped field runs with its default, not the unsigned value"
    );
}

/// Purge a bucket, with extra options.
#[derive(Capability, serde::Serialize, serde::Deserialize)]
#[capability(destructive)]
struct PurgeBucket {
    bucket: String,
    #[serde(flatten)]
    options: std::collections::BTreeMap<String, Value>,
}

#[test]
fn a_flattened_map_shadowing_a_field_is_refused() {
    let options = [("bucket".to_owned(), Value::from("prod-backups"))].into();
    let (path, why) = unsignable(Proposal::new(
        PurgeBucket {
            bucket: "staging-tmp".into(),
            options,
        },
        "analyst",
        "cleanup",
    ));
    assert_eq!(path, "$.bucket");
    assert!(why.contains("twice"), "{why}");
    let options = [("dry_run".to_owned(), Value::from(true))].into();
    assert!(
        Proposal::new(
            PurgeBucket {
                bucket: "staging-tmp".into(),
                options,
            },
            "analyst",
            "cleanup",
        )
        .is_ok()
    );
}

// ----- Attacks: approvals bound to the concrete type and the audience -----

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Staging;
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Prod;

/// Drop a database.
#[derive(Capability, serde::Serialize, serde::Deserialize)]
#[capability(destructive)]
struct DropDatabase<E> {
    name: String,
    #[serde(skip)]
    env: std::marker::PhantomData<E>,
}

fn drop_db<E>(name: &str) -> DropDatabase<E> {
    DropDatabase {
        name: name.into(),
        env: std::marker::PhantomData,
    }
}

mod staging {
    /// Purge the cache.
    #[derive(capability::Capability, serde::Serialize, serde::Deserialize)]
    #[capability(destructive)]
    pub struct Purge {
        pub cache: String,
    }
}

mod prod {
    /// Purge the cache.
    #[derive(capability::Capability, serde::Serialize, serde::Deserialize)]
    #[capability(destructive)]
    pub struct Purge {
        pub cache: String,
    }
}

#[test]
fn an_approval_for_one_instantiation_does_not_approve_another() {
    let s = setup();
    let staging = Proposal::new(drop_db::<Staging>("orders"), "analyst", "reset").expect("ok");
    let approval = sign_file(staging.file(), &s.key, NOW + 600);
    let prod = Proposal::new(drop_db::<Prod>("orders"), "analyst", "reset").expect("ok");
    assert_eq!(staging.file().args_digest, prod.file().args_digest);
    let error = refusal(s.gate.approve(prod, Some(&approval)));
    let GateError::OtherType { approved, proposed } = &error else {
        panic!("another error: {error}");
    };
    assert!(
        approved.ends_with("DropDatabase<it::write_gate::Staging>"),
        "{approved}"
    );
    assert!(
        proposed.ends_with("DropDatabase<it::write_gate::Prod>"),
        "{proposed}"
    );
    assert!(s.gate.approve(staging, Some(&approval)).is_ok());
}

#[test]
fn an_approval_for_one_module_does_not_approve_another() {
    let s = setup();
    let p = Proposal::new(staging::Purge { cache: "eu".into() }, "analyst", "stale").expect("ok");
    let approval = sign_file(p.file(), &s.key, NOW + 600);
    let other = Proposal::new(prod::Purge { cache: "eu".into() }, "analyst", "stale").expect("ok");
    assert_eq!(p.file().tool, other.file().tool);
    assert_eq!(p.file().descriptor_hash, other.file().descriptor_hash);
    let error = refusal(s.gate.approve(other, Some(&approval)));
    assert!(
        matches!(&error, GateError::OtherType { approved, proposed }
            if approved.ends_with("staging::Purge") && proposed.ends_with("prod::Purge")),
        "{error}"
    );
}

#[test]
fn an_approval_for_another_audience_is_refused() {
    let s = setup();
    let p = proposal("api-0");
    let approval =
        Approval::sign(p.file(), "alice", "staging", &s.key, NOW, NOW + 600).expect("signed");
    let error = refusal(s.gate.approve(p, Some(&approval)));
    assert_eq!(
        error,
        GateError::OtherAudience {
            audience: "staging".into(),
            gate: AUDIENCE.into()
        }
    );
    // Editing the audience breaks the signature.
    let mut edited = approval.clone();
    edited.audience = AUDIENCE.into();
    assert_eq!(
        refusal(s.gate.approve(proposal("api-0"), Some(&edited))),
        GateError::BadSignature("alice".into())
    );
    // A proposal meant for staging: not signed for prod-eu, and no prod-eu gate takes it.
    let meant = proposal("api-0").for_audience("staging");
    let error = Approval::sign(meant.file(), "alice", AUDIENCE, &s.key, NOW, NOW + 600)
        .expect_err("another audience");
    assert!(matches!(error, GateError::OtherAudience { .. }), "{error}");
    let mut unlabelled = meant.file().clone();
    unlabelled.audience = None;
    let approval = sign_file(&unlabelled, &s.key, NOW + 600);
    assert!(matches!(
        refusal(s.gate.approve(meant, Some(&approval))),
        GateError::OtherAudience { .. }
    ));
}

#[test]
fn files_with_a_repeated_key_are_refused_with_its_path() {
    let s = setup();
    let p = proposal("prod-db");
    let text = p.to_json();
    // A viewer shows the first `name`; serde_json keeps the last, which matches the digest.
    let doubled = text.replacen(
        "\"name\": \"prod-db\"",
        "\"name\": \"api-0\",\n    \"name\": \"prod-db\"",
        1,
    );
    assert_ne!(doubled, text);
    let error = ProposalFile::from_json(&doubled).expect_err("a repeated key");
    assert!(
        error.to_string().contains("duplicate key `$.args.name`"),
        "{error}"
    );
    let approval = sign(&s, &p).to_json();
    let doubled = approval.replacen(
        "\"approver\":",
        "\"approver\": \"mallory\",\n  \"approver\":",
        1,
    );
    let error = Approval::from_json(&doubled).expect_err("a repeated key");
    assert!(
        error.to_string().contains("duplicate key `$.approver`"),
        "{error}"
    );
}

// ----- Attacks: crypto and clocks -----

/// Ed25519's group order L, little-endian.
const L: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

#[test]
fn a_malleated_signature_is_refused() {
    let s = setup();
    let p = proposal("api-0");
    let mut approval = sign(&s, &p);
    let mut bytes: Vec<u8> = (0..64)
        .map(|i| u8::from_str_radix(&approval.signature[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    // S + L: the same point equation holds, a lax verifier accepts it as a second signature.
    let mut carry = 0u16;
    for (i, l) in L.iter().enumerate() {
        let sum = u16::from(bytes[32 + i]) + u16::from(*l) + carry;
        bytes[32 + i] = (sum & 0xff) as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0);
    approval.signature = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        refusal(s.gate.approve(p, Some(&approval))),
        GateError::BadSignature("alice".into())
    );
}

/// A preflight that counts its runs (a dry run against the cluster).
#[derive(Clone, Default)]
struct Counting(Arc<AtomicU64>);

impl Check for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn check(&self, _tool: &CapabilityManifest, _args: &Value) -> Result<(), String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn no_validator_or_preflight_runs_before_the_approval_is_genuine() {
    let s = setup();
    let runs = Counting::default();
    let gate = WriteGate::new(AUDIENCE, MemoryLedger::new())
        .approver("alice", s.key.public_key())
        .clock(s.clock.clone())
        .validator(runs.clone())
        .preflight(runs.clone());
    let p = proposal("api-0");
    let good = sign(&s, &p);
    let mallory = SecretKey::generate().expect("key");
    let forged = sign_file(p.file(), &mallory, NOW + 600);
    let staging =
        Approval::sign(p.file(), "alice", "staging", &s.key, NOW, NOW + 600).expect("signed");
    let other_args = sign(&s, &proposal("api-9"));
    for approval in [None, Some(&forged), Some(&staging), Some(&other_args)] {
        assert!(gate.approve(proposal("api-0"), approval).is_err());
    }
    assert_eq!(runs.0.load(Ordering::SeqCst), 0, "no check ran");
    assert!(gate.approve(p, Some(&good)).is_ok());
    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        2,
        "validator and preflight ran"
    );
}

/// The workspace's one clock (`capability::clock`, which the HTTP edge and the agent loop's
/// guards read too) drives the gate: an approval holds until its expiry and is refused a second
/// later, the clock moved, not waited for.
#[test]
fn an_approval_expires_on_the_shared_clock_the_gate_is_given() {
    use capability::clock::{ManualClock, SharedClock};
    use std::time::{Duration, UNIX_EPOCH};
    let key = SecretKey::generate().expect("randomness");
    let manual = Arc::new(ManualClock::at(UNIX_EPOCH + Duration::from_secs(NOW)));
    let shared: SharedClock = manual.clone();
    let gate = WriteGate::new(AUDIENCE, MemoryLedger::new())
        .approver("alice", key.public_key())
        .clock(shared);
    manual.advance(Duration::from_secs(599));
    let held = proposal("api-0");
    let approval = sign_file(held.file(), &key, NOW + 600);
    assert!(
        gate.approve(held, Some(&approval)).is_ok(),
        "valid a second before"
    );
    let late = proposal("api-1");
    let approval = sign_file(late.file(), &key, NOW + 600);
    manual.advance(Duration::from_secs(1));
    assert_eq!(
        refusal(gate.approve(late, Some(&approval))),
        GateError::Expired {
            expired_at: NOW + 600,
            now: NOW + 600
        }
    );
}

#[test]
fn an_expired_approval_stays_expired_when_the_clock_goes_back() {
    let s = setup();
    let p = proposal("api-0");
    let approval = sign(&s, &p);
    s.clock.0.store(NOW + 600, Ordering::SeqCst);
    let p = *s
        .gate
        .approve(p, Some(&approval))
        .expect_err("expired")
        .proposal;
    // Back within the tolerance (an NTP step): still expired.
    s.clock
        .0
        .store(NOW + 600 - CLOCK_TOLERANCE_SECS, Ordering::SeqCst);
    let error = refusal(s.gate.approve(p, Some(&approval)));
    assert!(matches!(error, GateError::Expired { .. }), "{error}");
}

#[test]
fn an_approval_issued_in_the_future_is_refused() {
    let s = setup();
    let p = proposal("api-0");
    let issued = NOW + CLOCK_TOLERANCE_SECS + 60;
    let approval =
        Approval::sign(p.file(), "alice", AUDIENCE, &s.key, issued, issued + 600).expect("signed");
    let error = refusal(s.gate.approve(p, Some(&approval)));
    assert_eq!(
        error,
        GateError::IssuedInFuture {
            issued_at: issued,
            now: NOW
        }
    );
    // Within the tolerance: fine.
    let p = proposal("api-0");
    let approval =
        Approval::sign(p.file(), "alice", AUDIENCE, &s.key, NOW + 2, NOW + 600).expect("signed");
    assert!(s.gate.approve(p, Some(&approval)).is_ok());
}

#[test]
fn approvals_valid_longer_than_the_gates_maximum_are_refused() {
    let s = setup();
    let p = proposal("api-0");
    let two_days = sign_file(p.file(), &s.key, NOW + 2 * 86_400);
    assert_eq!(
        refusal(s.gate.approve(p, Some(&two_days))),
        GateError::TooLong {
            validity: 2 * 86_400,
            max: MAX_VALIDITY_SECS
        }
    );
    let strict = WriteGate::new(AUDIENCE, MemoryLedger::new())
        .approver("alice", s.key.public_key())
        .clock(s.clock.clone())
        .max_validity(300);
    let p = proposal("api-0");
    let ten_minutes = sign(&s, &p);
    let error = refusal(strict.approve(p, Some(&ten_minutes)));
    assert_eq!(
        error,
        GateError::TooLong {
            validity: 600,
            max: 300
        }
    );
    assert!(error.to_string().contains("maximum of 300 s"), "{error}");
}

/// A ledger that cannot be reached until it is repaired, then an in-memory one.
#[derive(Debug, Default)]
struct FlakyLedger {
    down: std::sync::atomic::AtomicBool,
    inner: MemoryLedger,
}

impl capability::gate::ApprovalLedger for FlakyLedger {
    fn consume(
        &self,
        approval_id: &str,
        expires_at: u64,
    ) -> Result<capability::gate::Consumed, capability::gate::StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(capability::gate::StoreError::new(
                "test",
                "connection refused",
            ));
        }
        self.inner.consume(approval_id, expires_at)
    }
}

#[test]
fn an_unreachable_ledger_refuses_and_does_not_use_the_approval_up() {
    let key = SecretKey::generate().expect("randomness");
    let clock = TestClock(Arc::new(AtomicU64::new(NOW)));
    let ledger = Arc::new(FlakyLedger::default());
    ledger.down.store(true, Ordering::SeqCst);
    let gate = WriteGate::new(AUDIENCE, ledger.clone())
        .approver("alice", key.public_key())
        .clock(clock);
    let p = proposal("api-0");
    let approval = sign_file(p.file(), &key, NOW + 600);
    let rejected = gate.approve(p, Some(&approval)).expect_err("ledger down");
    assert!(
        matches!(&rejected.error, GateError::LedgerUnavailable(e) if e.message == "connection refused"),
        "{:?}",
        rejected.error
    );
    assert!(
        rejected.error.to_string().contains("not used up"),
        "{}",
        rejected.error
    );
    // Once the ledger is back, the same approval runs, once.
    ledger.down.store(false, Ordering::SeqCst);
    let approved = gate
        .approve(*rejected.proposal, Some(&approval))
        .expect("approved once the ledger answers");
    assert_eq!(RestartPod::execute(approved), "restarted checkout/api-0");
    let again = gate.approve(proposal("api-0"), Some(&approval));
    assert_eq!(refusal(again), GateError::Replay(approval.id.clone()));
}

#[test]
fn two_gates_sharing_a_ledger_run_an_approval_once() {
    let key = SecretKey::generate().expect("randomness");
    let ledger = Arc::new(MemoryLedger::new());
    let gate = |ledger: Arc<MemoryLedger>| {
        WriteGate::new(AUDIENCE, ledger)
            .approver("alice", key.public_key())
            .clock(TestClock(Arc::new(AtomicU64::new(NOW))))
    };
    let (first, second) = (gate(ledger.clone()), gate(ledger));
    let p = proposal("api-0");
    let approval = sign_file(p.file(), &key, NOW + 600);
    assert!(first.approve(p, Some(&approval)).is_ok());
    assert_eq!(
        refusal(second.approve(proposal("api-0"), Some(&approval))),
        GateError::Replay(approval.id.clone())
    );
}

#[test]
fn an_approval_runs_only_for_its_proposer_and_one_without_a_proposer_is_refused_saying_why() {
    let s = setup();
    let approval = sign(&s, &proposal("api-0"));
    assert_eq!(approval.proposer, "analyst");
    // The same call proposed by another agent that learnt the approval: refused, not used up.
    let other = Proposal::new(pod("api-0"), "intern", "me too").expect("serializable");
    let error = refusal(s.gate.approve(other, Some(&approval)));
    assert_eq!(
        error,
        GateError::OtherProposer {
            approved: "analyst".into(),
            caller: "intern".into()
        }
    );
    assert!(
        error
            .to_string()
            .contains("runs only for whoever made the proposal")
    );
    // Rewriting the proposer in the approval breaks its signature.
    let mut forged = approval.clone();
    forged.proposer = "intern".into();
    let other = Proposal::new(pod("api-0"), "intern", "me too").expect("serializable");
    let error = refusal(s.gate.approve(other, Some(&forged)));
    assert_eq!(error, GateError::BadSignature("alice".into()));
    // The proposer's own call still runs: the refusals used nothing up.
    assert!(s.gate.approve(proposal("api-0"), Some(&approval)).is_ok());

    // An approval file from before approvals bound their proposer (no `proposer` key): it
    // reads, and every gate refuses it with the reason, not as a forgery.
    let mut old: serde_json::Map<String, Value> =
        serde_json::from_str(&sign(&s, &proposal("api-1")).to_json()).expect("json");
    old.remove("proposer");
    let old = Approval::from_json(&Value::Object(old).to_string()).expect("an old approval reads");
    let error = refusal(s.gate.approve(proposal("api-1"), Some(&old)));
    assert_eq!(error, GateError::NoProposer(old.id.clone()));
    assert!(
        error.to_string().contains("have the proposal signed again"),
        "{error}"
    );
}

#[test]
fn a_proposal_that_names_no_proposer_cannot_be_signed() {
    let s = setup();
    let p = Proposal::new(pod("api-0"), " ", "why").expect("serializable");
    let error = Approval::sign(p.file(), "alice", AUDIENCE, &s.key, NOW, NOW + 60)
        .expect_err("no proposer");
    assert!(error.to_string().contains("names no proposer"), "{error}");
}
