//! Sensitive values stay secret in the audit trail: the trail alone does not let anyone confirm a
//! guessed password, while the holder of the sink's digest key can.
//!
//! The attacker here holds the trail file and a dictionary that contains the real password. They
//! try every unkeyed form a digest could take: SHA-256 of the value, of its canonical JSON, and of
//! the whole canonical input with the guess in place. The key holder checks with an HMAC-SHA-256
//! written here, independent of the library's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use capability::Capability;
use capability::audit::{
    AuditError, AuditRecord, AuditSink, AuditedDispatch, Caller, DigestKey, FlushPolicy, JsonlSink,
    KeyError, MemorySink, OnAuditFailure, Outcome, ProblemKind, Verdict,
};
use capability::authz::{Ceiling, ToolContext};
use serde_json::{Value, json};

/// Log in to the console.
#[derive(Capability)]
#[capability(destructive = false, provider = "console", scopes = ["console:login"])]
#[capability(sensitive = ["password"])]
#[allow(dead_code)]
struct Login {
    user: String,
    password: String,
}

/// The key holder's key, as a key file holds it.
const KEY_HEX: &str = "5f2b8c0e9a71d4436e18b2a09c7f5d31e4a6b8c2d0f19e37a5c4b6d8e0f21a3c";

const CALLER: Caller<'static> = Caller::new("watcher").step("login");

/// The real password, and the attacker's dictionary, which contains it.
const PASSWORD: &str = "hunter2";
const DICTIONARY: &[&str] = &[
    "123456", "password", "qwerty", "letmein", "admin", "welcome", "monkey", "dragon", "hunter2",
    "trustno1", "iloveyou", "sunshine", "",
];

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit_secrets");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn key() -> DigestKey {
    DigestKey::from_hex(KEY_HEX).expect("a valid key")
}

fn operator() -> ToolContext {
    ToolContext::new("operator", "s", Ceiling::Unrestricted).with_scopes(["console:login"])
}

fn login_input(user: &str, password: &str) -> Value {
    json!({ "user": user, "password": password })
}

/// Writes three logins of `ada` (the real password) and one of `bob` to a JSON Lines trail
/// keyed with [`KEY_HEX`], and reads it back (verified: no key is needed for that).
fn write_trail(path: &Path) -> Vec<AuditRecord> {
    {
        let sink = JsonlSink::open(path, FlushPolicy::EveryRecord)
            .expect("open")
            .with_digest_key(key());
        let dispatch = AuditedDispatch::new(Arc::new(sink));
        for user in ["ada", "ada", "bob", "ada"] {
            let out: Outcome<bool, String> = dispatch.call_tool::<Login, _, _>(
                &operator(),
                CALLER,
                &login_input(user, PASSWORD),
                || Ok(true),
            );
            assert!(out.is_done());
        }
    }
    let (records, report) = capability::audit::read_jsonl(path).expect("readable");
    // Four calls: an intent and an outcome each. The outcomes, one per call.
    assert_eq!((report.records, report.problem), (8, None));
    assert!(report.unfinished.is_empty());
    records
        .into_iter()
        .filter(|r| r.phase == Some(capability::audit::Phase::Outcome))
        .collect()
}

/// The hex part of a digest as written in the trail (`sha256:<hex>`, `hmac-sha256:<hex>` or bare).
fn hex_part(digest: &str) -> &str {
    digest.rsplit(':').next().unwrap_or(digest)
}

/// Every guess whose unkeyed digest matches a digest of the trail: (guess, which digest).
fn dictionary_attack(records: &[AuditRecord]) -> Vec<(String, &'static str)> {
    let mut found = Vec::new();
    for record in records {
        let field = record.input["password"].as_str().unwrap_or_default();
        let user = record.input["user"].as_str().unwrap_or_default();
        for guess in DICTIONARY {
            let of_value = sha256_hex(guess.as_bytes());
            let of_json = sha256_hex(capability::json::to_canonical_json(&json!(guess)).as_bytes());
            let of_input = sha256_hex(
                capability::json::to_canonical_json(&login_input(user, guess)).as_bytes(),
            );
            for candidate in [&of_value, &of_json, &of_input] {
                if hex_part(field) == candidate || field == candidate {
                    found.push(((*guess).to_owned(), "password field"));
                }
                if hex_part(&record.input_digest) == candidate || record.input_digest == *candidate
                {
                    found.push(((*guess).to_owned(), "input_digest"));
                }
            }
        }
    }
    found
}

#[test]
fn a_dictionary_attack_on_the_trail_alone_finds_nothing() {
    let path = scratch("dictionary.jsonl");
    let records = write_trail(&path);
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(
        !text.contains(PASSWORD),
        "the password itself is not stored"
    );

    // The attack works where digests are unkeyed: a record as an unkeyed trail would hold it.
    let mut unkeyed = records[0].clone();
    unkeyed.input["password"] = json!(format!(
        "sha256:{}",
        sha256_hex(capability::json::to_canonical_json(&json!(PASSWORD)).as_bytes())
    ));
    unkeyed.input_digest =
        sha256_hex(capability::json::to_canonical_json(&login_input("ada", PASSWORD)).as_bytes());
    let found = dictionary_attack(&[unkeyed]);
    assert!(
        found.contains(&(PASSWORD.to_owned(), "password field")),
        "{found:?}"
    );
    assert!(
        found.contains(&(PASSWORD.to_owned(), "input_digest")),
        "{found:?}"
    );

    // On the real trail it finds nothing.
    let found = dictionary_attack(&records);
    assert!(
        found.is_empty(),
        "the trail alone confirmed guesses: {found:?}"
    );
    // And every digest says it is keyed.
    for record in &records {
        for digest in [
            record.input["password"].as_str().expect("a digest"),
            &record.input_digest,
            record.output_digest.as_deref().expect("ran"),
        ] {
            assert!(
                digest.starts_with("hmac-sha256:") && digest.len() == 12 + 64,
                "{digest}"
            );
        }
    }
}

#[test]
fn the_key_holder_confirms_a_guess() {
    let records = write_trail(&scratch("key-holder.jsonl"));
    let key = hex_decode(KEY_HEX);
    let keyed = |data: &str| format!("hmac-sha256:{}", hex(&hmac_sha256(&key, data.as_bytes())));
    for record in &records {
        let user = record.input["user"].as_str().expect("the user is kept");
        let confirmed: Vec<&str> = DICTIONARY
            .iter()
            .copied()
            .filter(|guess| {
                record.input["password"]
                    == json!(keyed(&capability::json::to_canonical_json(&json!(guess))))
            })
            .collect();
        assert_eq!(confirmed, [PASSWORD], "the password field");
        let confirmed: Vec<&str> = DICTIONARY
            .iter()
            .copied()
            .filter(|guess| {
                record.input_digest
                    == keyed(&capability::json::to_canonical_json(&login_input(
                        user, guess,
                    )))
            })
            .collect();
        assert_eq!(confirmed, [PASSWORD], "the input digest");
        assert_eq!(
            record.output_digest,
            Some(keyed("true")),
            "the output digest"
        );
        // The library's own helper agrees with the independent HMAC.
        assert_eq!(
            record.input["password"],
            json!(self::key().digest_json(&json!(PASSWORD)))
        );
    }
    // The same call under the same key gives the same digests: the key holder can correlate.
    let ada: Vec<&AuditRecord> = records
        .iter()
        .filter(|r| r.input["user"] == "ada")
        .collect();
    assert_eq!(ada.len(), 3);
    assert!(ada.iter().all(|r| r.input_digest == ada[0].input_digest));
    assert_ne!(
        records[2].input_digest, ada[0].input_digest,
        "bob's input differs"
    );
    assert_eq!(records[2].input["password"], ada[0].input["password"]);
}

#[test]
fn the_key_appears_nowhere_in_the_trail_or_in_debug_output() {
    let path = scratch("no-key.jsonl");
    write_trail(&path);
    let bytes = std::fs::read(&path).expect("read");
    let text = String::from_utf8_lossy(&bytes);
    let raw = hex_decode(KEY_HEX);
    assert!(!text.contains(KEY_HEX));
    assert!(!text.contains(&KEY_HEX.to_uppercase()));
    assert!(!bytes.windows(raw.len()).any(|w| w == raw), "raw key bytes");
    // Nor does a recognisable piece of it (its first or last 8 hex digits).
    assert!(!text.contains(&KEY_HEX[..8]) && !text.contains(&KEY_HEX[56..]));

    let sink = JsonlSink::open(&path, FlushPolicy::EveryRecord)
        .expect("reopen")
        .with_digest_key(key());
    let memory = MemorySink::new().with_digest_key(key());
    for debug in [
        format!("{:?}", key()),
        format!("{:#?}", key()),
        format!("{sink:?}"),
        format!("{memory:?}"),
        format!("{:?}", AuditedDispatch::new(Arc::new(memory))),
    ] {
        assert!(!debug.contains(&KEY_HEX[..8]), "{debug}");
        assert!(!debug.to_lowercase().contains(&KEY_HEX[..8]), "{debug}");
    }
    assert_eq!(format!("{:?}", key()), "DigestKey(<secret>)");
    // Only the explicit call gives it out.
    assert_eq!(key().expose_hex(), KEY_HEX);
}

#[test]
fn different_keys_give_different_digests() {
    let input = login_input("ada", PASSWORD);
    let record = |sink: MemorySink| {
        let sink = Arc::new(sink);
        let dispatch = AuditedDispatch::new(sink.clone());
        let out: Outcome<String, String> =
            dispatch.call_tool::<Login, _, _>(&operator(), CALLER, &input, || Ok("t0k3n".into()));
        assert!(out.is_done());
        // The outcome: it has the output's digest too.
        sink.records().remove(1)
    };
    let other_hex = "00".repeat(31) + "01";
    let one = record(MemorySink::new().with_digest_key(key()));
    let again = record(MemorySink::new().with_digest_key(key()));
    let other =
        record(MemorySink::new().with_digest_key(DigestKey::from_hex(&other_hex).expect("key")));
    let digests = |r: &AuditRecord| {
        (
            r.input["password"].clone(),
            r.input_digest.clone(),
            r.output_digest.clone(),
        )
    };
    assert_eq!(digests(&one), digests(&again), "same key, same digests");
    assert_ne!(one.input["password"], other.input["password"]);
    assert_ne!(one.input_digest, other.input_digest);
    assert_ne!(one.output_digest, other.output_digest);
    // Sinks without a key each make a random one: their digests differ from each other's too.
    let (a, b) = (record(MemorySink::new()), record(MemorySink::new()));
    assert_ne!(a.input["password"], b.input["password"]);
    assert_ne!(a.input_digest, b.input_digest);
    assert_ne!(a.input_digest, one.input_digest);
    // A key given as bytes is the same key as its hex text (in either case).
    let from_bytes = record(
        MemorySink::new()
            .with_digest_key(DigestKey::from_bytes(&hex_decode(KEY_HEX)).expect("32 bytes")),
    );
    let upper = record(MemorySink::new().with_digest_key(
        DigestKey::from_hex(&format!("  {}\n", KEY_HEX.to_uppercase())).expect("hex"),
    ));
    assert_eq!(digests(&from_bytes), digests(&one));
    assert_eq!(digests(&upper), digests(&one));
}

#[test]
fn a_bad_key_is_a_clear_error_that_does_not_repeat_it() {
    let cases: [(Result<DigestKey, KeyError>, &str); 5] = [
        (DigestKey::from_hex(""), "64 hex digits, found 0"),
        (
            DigestKey::from_hex(&KEY_HEX[..62]),
            "64 hex digits, found 62",
        ),
        (
            DigestKey::from_hex(&format!("{KEY_HEX}00")),
            "64 hex digits, found 66",
        ),
        (
            DigestKey::from_hex(&KEY_HEX.replace('5', "g")),
            "has other characters",
        ),
        (DigestKey::from_bytes(&[7; 16]), "32 bytes, found 16"),
    ];
    for (result, expected) in cases {
        let error = result.expect_err("refused");
        let message = error.to_string();
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains(&KEY_HEX[..8]), "{message}");
        assert!(!format!("{error:?}").contains(&KEY_HEX[..8]));
    }
    // A generated key is a fresh one each time.
    let (a, b) = (
        DigestKey::generate().expect("random"),
        DigestKey::generate().expect("random"),
    );
    assert_ne!(a.expose_hex(), b.expose_hex());
    assert_eq!(a.expose_hex().len(), 64);
}

/// A downstream sink that cannot give a digest key (its secret store is down).
struct Keyless {
    appended: AtomicUsize,
}

impl AuditSink for Keyless {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        self.appended.fetch_add(1, Ordering::SeqCst);
        Ok(record)
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        Err(AuditError::DigestKey(KeyError::NoRandomness(
            "the secret store is down".into(),
        )))
    }
}

#[test]
fn a_sink_without_a_key_gets_no_unkeyed_record_and_stops_calls() {
    let sink = Arc::new(Keyless {
        appended: AtomicUsize::new(0),
    });
    let ran = AtomicUsize::new(0);
    let call = |dispatch: &AuditedDispatch| -> Outcome<bool, String> {
        dispatch.call_tool::<Login, _, _>(
            &operator(),
            CALLER,
            &login_input("ada", PASSWORD),
            || {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(true)
            },
        )
    };
    // Fail-closed by default: the call does not run.
    let dispatch = AuditedDispatch::new(sink.clone());
    let Outcome::AuditFailed(error) = call(&dispatch) else {
        panic!("must not run without a record")
    };
    assert!(
        error.to_string().contains("has no digest key")
            && error.to_string().contains("store is down"),
        "{error}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // A policy that allows calls without a record runs it and counts the lost record.
    let dispatch =
        AuditedDispatch::new(sink.clone()).on_audit_failure(OnAuditFailure::AllowAndCount);
    assert!(call(&dispatch).is_done());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(dispatch.lost_records(), 1);
    // Either way, no record with an unkeyed (or no) digest reached the sink.
    assert_eq!(sink.appended.load(Ordering::SeqCst), 0);
    // And a call that is not allowed is still refused.
    let monitor = ToolContext::new("monitor", "m", Ceiling::ReadOnly);
    let out: Outcome<bool, String> =
        dispatch
            .call_tool::<Login, _, _>(&monitor, CALLER, &login_input("ada", PASSWORD), || Ok(true));
    assert!(matches!(out, Outcome::Denied(_)), "denied");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

/// `verify_jsonl` (and so `capability audit verify`) checks a keyed trail without the key.
#[test]
fn a_keyed_trail_verifies_without_the_key() {
    let path = scratch("verify.jsonl");
    let records = write_trail(&path);
    assert!(records.iter().all(|r| r.verdict == Verdict::Allowed));
    let report = capability::audit::verify_jsonl(&path).expect("readable");
    assert_eq!((report.records, report.problem), (8, None));
    // An edited digest is caught like any other edit.
    let text = std::fs::read_to_string(&path).expect("read");
    // Bob's login (its intent, line 5, then its outcome): the one call with its input digest.
    let digest = records[2].input_digest.clone();
    let forged = format!("hmac-sha256:{}", "0".repeat(64));
    std::fs::write(&path, text.replacen(&digest, &forged, 1)).expect("write");
    let problem = capability::audit::verify_jsonl(&path)
        .expect("readable")
        .problem
        .expect("detected");
    assert_eq!((problem.line, problem.kind), (5, ProblemKind::Edited));
}

/// HMAC-SHA-256 (RFC 2104) on the independent SHA-256 below.
fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&sha256(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let mut inner = pad(0x36);
    inner.extend_from_slice(data);
    let mut outer = pad(0x5c);
    outer.extend_from_slice(&sha256(&inner));
    sha256(&outer)
}

fn hex_decode(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// SHA-256 in hex, with an independent SHA-256.
fn sha256_hex(data: &[u8]) -> String {
    hex(&sha256(data))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A tiny SHA-256, independent of the library's, for checking digests.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64) * 8;
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes([
                chunk[4 * i],
                chunk[4 * i + 1],
                chunk[4 * i + 2],
                chunk[4 * i + 3],
            ]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let mut out = [0u8; 32];
    for (i, word) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&word.to_be_bytes());
    }
    out
}
