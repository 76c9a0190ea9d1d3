//! `capability audit witness` as a process on loopback, `audit prove --witness` as its client,
//! and `audit check-proof --witness-key/--witnesses/--rotation`: a fork refused (state
//! unchanged), a stale witness (409 with its size, reported by the client), a witness killed
//! with SIGKILL and restarted keeping its state, an edited state file refused, an unknown
//! witness key ignored and the quorum naming who is missing, a rotated key, raw requests that do
//! not follow the protocol.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capability::audit::tlog::KeyRotation;
use capability::audit::{ChainHead, CheckpointVerifier, GENESIS};
use capability::gate::{PublicKey, SecretKey};

use crate::trails::{WitnessProcess, capability, record, witness_args};

fn scratch(name: &str) -> PathBuf {
    crate::trails::scratch("audit_witness", name)
}

/// Writes the chain of `replica-1` over these tools.
fn trail(path: &Path, tools: &[&str]) {
    let mut head = ChainHead::new("replica-1", 0, GENESIS);
    let mut text = String::new();
    for tool in tools {
        text.push_str(&head.seal(record(tool)).to_line());
        text.push('\n');
        head.commit();
    }
    std::fs::write(path, text).expect("write");
}

/// Keys (writer, witness, another witness), the trail of 7 records, its first 4, and the 7 with
/// record 4 rewritten.
fn setup(name: &str) -> PathBuf {
    let dir = scratch(name);
    for key in ["writer.key", "witness.key", "other.key", "new.key"] {
        let (code, text) = capability(&dir, &["keygen", "--out", key]);
        assert_eq!(code, 0, "{text}");
    }
    let tools = ["a", "b", "c", "d", "e", "f", "g"];
    trail(&dir.join("trail.jsonl"), &tools);
    trail(&dir.join("early.jsonl"), &tools[..4]);
    trail(
        &dir.join("forked.jsonl"),
        &["a", "b", "c", "D", "e", "f", "g"],
    );
    dir
}

/// The witness of these tests: `witness.key`, `state.json`, `replica-1`'s log.
const WITNESS: (&str, &str, &str) = (
    "witness.key",
    "state.json",
    "capability/replica-1=writer.key.pub",
);

fn start_witness(dir: &Path) -> WitnessProcess {
    let (key, state, log) = WITNESS;
    crate::trails::start_witness(dir, key, state, log)
}

fn prove(dir: &Path, trail: &str, seq: u64, out: &str, witness: &str) -> (i32, String) {
    let record = format!("replica-1:{seq}");
    let args = [
        "audit",
        "prove",
        trail,
        "--record",
        &record,
        "--key",
        "writer.key",
        "--out",
        out,
        "--force",
        "--witness",
        witness,
    ];
    capability(dir, &args)
}

/// One raw HTTP/1.1 exchange: the status, the `Content-Type` and the body.
fn raw(url: &str, method: &str, path: &str, body: &[u8]) -> (u16, String, String) {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (status, content_type, body.to_owned())
}

/// The checkpoint of a proof file, as it stands after the blank line.
fn checkpoint_of(proof: &Path) -> String {
    let text = std::fs::read_to_string(proof).unwrap();
    text.split_once("\n\n").unwrap().1.to_owned()
}

#[test]
fn a_witness_cosigns_refuses_a_fork_and_a_stale_view_and_keeps_its_state_across_sigkill() {
    let dir = setup("lifecycle");
    let witness = start_witness(&dir);
    let (code, text) = prove(&dir, "early.jsonl", 2, "early.tlog-proof", &witness.url);
    assert_eq!(code, 0, "{text}");
    let check = |file: &str, extra: &[&str]| {
        let args = [
            &["audit", "check-proof", file, "--key", "writer.key.pub"],
            extra,
        ]
        .concat();
        capability(&dir, &args)
    };
    let (code, text) = check("early.tlog-proof", &["--witness-key", "witness.key.pub"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("cosigned by [witness.key.pub]"), "{text}");
    // A witness nobody asked: its key is not on the note, and two are required.
    let both = [
        "--witness-key",
        "other.key.pub",
        "--witness-key",
        "witness.key.pub",
    ];
    let (code, text) = check(
        "early.tlog-proof",
        &[&both[..], &["--witnesses", "2"]].concat(),
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("1 valid cosignature(s) where 2 are required")
            && text.contains("missing: [other.key.pub (no cosignature)]"),
        "{text}"
    );
    let (code, text) = check(
        "early.tlog-proof",
        &[&both[..], &["--witnesses", "1"]].concat(),
    );
    assert_eq!(code, 0, "{text}");

    // The log grows to 7: the witness holds 4, answers 409, the client proves consistency.
    let (code, text) = prove(&dir, "trail.jsonl", 5, "r5.tlog-proof", &witness.url);
    assert_eq!(code, 0, "{text}");
    let (code, text) = check("r5.tlog-proof", &["--witness-key", "witness.key.pub"]);
    assert_eq!(code, 0, "{text}");
    let state = std::fs::read(dir.join("state.json")).unwrap();

    // Killed outright and started again: it still holds 7.
    drop(witness);
    let witness = start_witness(&dir);
    let (code, text) = prove(&dir, "early.jsonl", 2, "stale.tlog-proof", &witness.url);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("stale request (409): the witness holds a checkpoint of 7 records"),
        "{text}"
    );
    // A fork: another tree of 7 records, signed by the writer's own key.
    let (code, text) = prove(&dir, "forked.jsonl", 2, "fork.tlog-proof", &witness.url);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("refused (422): fork: "), "{text}");
    let (code, text) = check("fork.tlog-proof", &["--witness-key", "witness.key.pub"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("missing: [witness.key.pub (no cosignature)]"),
        "{text}"
    );
    assert_eq!(
        std::fs::read(dir.join("state.json")).unwrap(),
        state,
        "state unchanged"
    );

    // Raw: a stale old size gets 409 with the size held, as `text/x.tlog.size`.
    let checkpoint = checkpoint_of(&dir.join("r5.tlog-proof"));
    let (status, content_type, body) = raw(
        &witness.url,
        "POST",
        "/add-checkpoint",
        format!("old 3\n\n{checkpoint}").as_bytes(),
    );
    assert_eq!(
        (status, content_type.as_str(), body.as_str()),
        (409, "text/x.tlog.size", "7\n")
    );
    let (status, _, body) = raw(
        &witness.url,
        "POST",
        "/add-checkpoint",
        format!("old 7\n\n{checkpoint}").as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("\u{2014} capability-witness "), "{body}");
    let (status, _, body) = raw(&witness.url, "POST", "/add-checkpoint", b"old 07\n\nx\n");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("`old <decimal size>`"), "{body}");
    let (status, _, _) = raw(&witness.url, "POST", "/add-checkpoint", &vec![b'a'; 70_000]);
    assert_eq!(status, 413);
    let (status, _, _) = raw(&witness.url, "GET", "/add-checkpoint", b"");
    assert_eq!(status, 405);
    let (status, _, _) = raw(&witness.url, "GET", "/elsewhere", b"");
    assert_eq!(status, 404);
    // Monitors read the checkpoint held, with the log's signature and the witness's.
    let hash = capability_rules::sha256_hex(b"capability/replica-1");
    let (status, _, body) = raw(&witness.url, "GET", &format!("/{hash}/checkpoint"), b"");
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("capability/replica-1\n7\n"), "{body}");
    assert!(body.contains("\u{2014} capability-witness "), "{body}");
    let (status, _, _) = raw(
        &witness.url,
        "GET",
        &format!("/{}/checkpoint", "0".repeat(64)),
        b"",
    );
    assert_eq!(status, 404);

    // The state file edited by hand: the witness refuses to start, saying so.
    drop(witness);
    let edited = String::from_utf8(state)
        .unwrap()
        .replacen("\\n7\\n", "\\n6\\n", 1);
    std::fs::write(dir.join("state.json"), edited).unwrap();
    let (code, text) = capability(&dir, &witness_args(WITNESS.0, WITNESS.1, WITNESS.2));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("state.json: edited"), "{text}");
}

#[test]
fn check_proof_takes_a_rotated_key_in_its_span_only() {
    let dir = setup("rotation");
    let read_key = |f: &str| SecretKey::from_text(&std::fs::read_to_string(dir.join(f)).unwrap());
    let (old, new) = (
        read_key("writer.key").unwrap(),
        read_key("new.key").unwrap(),
    );
    let new_public: &dyn CheckpointVerifier = &new.public_key();
    let rotation = KeyRotation::sign(
        "capability/replica-1",
        5,
        &new_public.public_key_hex(),
        &old,
    )
    .unwrap();
    std::fs::write(dir.join("rotation.note"), rotation.to_text()).unwrap();
    let _: PublicKey = old.public_key();
    let prove_with = |trail: &str, key: &str, out: &str| {
        let args = [
            "audit",
            "prove",
            trail,
            "--record",
            "replica-1:1",
            "--key",
            key,
            "--out",
            out,
        ];
        let (code, text) = capability(&dir, &args);
        assert_eq!(code, 0, "{text}");
    };
    prove_with("early.jsonl", "writer.key", "old-4.tlog-proof");
    prove_with("early.jsonl", "new.key", "new-4.tlog-proof");
    prove_with("trail.jsonl", "new.key", "new-7.tlog-proof");
    prove_with("trail.jsonl", "writer.key", "old-7.tlog-proof");
    let check = |file: &str| {
        let args = [
            "audit",
            "check-proof",
            file,
            "--key",
            "writer.key.pub",
            "--key",
            "new.key.pub",
            "--rotation",
            "rotation.note",
        ];
        capability(&dir, &args)
    };
    let (code, text) = check("old-4.tlog-proof");
    assert_eq!(code, 0, "old keys keep verifying old checkpoints: {text}");
    let (code, text) = check("new-7.tlog-proof");
    assert_eq!(code, 0, "{text}");
    let (code, text) = check("new-4.tlog-proof");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("takes over only at size 5"), "{text}");
    let (code, text) = check("old-7.tlog-proof");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("handed over at size 5"), "{text}");
    // Without the rotation, the new key is a key never rotated in.
    let args = [
        "audit",
        "check-proof",
        "new-7.tlog-proof",
        "--key",
        "writer.key.pub",
        "--key",
        "new.key.pub",
    ];
    let (code, text) = capability(&dir, &args);
    assert_eq!(code, 1, "{text}");
}
