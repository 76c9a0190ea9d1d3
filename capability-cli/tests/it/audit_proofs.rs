//! `capability audit prove`, `check-proof` and `consistency`: evidence from a JSON Lines trail
//! that anyone with the writer's public key checks alone, and every kind of tampering named
//! (a wrong key, a forged signature, a proof for another record, a cut tail, a rewritten record,
//! a fork). The proofs and checkpoints are also checked by code nobody here wrote: pymerkle and
//! `cryptography` (tests/python/tlog_check.py, in the tests' hash-pinned Python environment).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use capability::audit::{ChainHead, GENESIS};
use serde_json::{Value, json};

use crate::trails::{capability, record};

fn scratch(name: &str) -> PathBuf {
    crate::trails::scratch("audit_proofs", name)
}

/// Writes the chain of `replica-1` over these tools; returns each record's line.
fn trail(path: &Path, tools: &[&str]) -> Vec<String> {
    let mut head = ChainHead::new("replica-1", 0, GENESIS);
    let lines: Vec<String> = tools
        .iter()
        .map(|tool| {
            let sealed = head.seal(record(tool));
            head.commit();
            sealed.to_line()
        })
        .collect();
    std::fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .expect("write");
    lines
}

const TOOLS: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// A directory with a key pair (`capability keygen`), the trail of 7 records, the same trail at
/// 4 records, and the trail with record 2 rewritten (its chain computed again).
fn setup(name: &str) -> (PathBuf, Vec<String>) {
    let dir = scratch(name);
    let (code, text) = capability(&dir, &["keygen", "--out", "writer.key"]);
    assert_eq!(code, 0, "{text}");
    let (_, other) = capability(&dir, &["keygen", "--out", "other.key"]);
    assert!(dir.join("other.key.pub").is_file(), "{other}");
    let lines = trail(&dir.join("trail.jsonl"), &TOOLS);
    trail(&dir.join("early.jsonl"), &TOOLS[..4]);
    trail(
        &dir.join("rewritten.jsonl"),
        &["a", "B", "c", "d", "e", "f", "g"],
    );
    (dir, lines)
}

fn prove(dir: &Path, trail: &str, record: &str, out: &str) {
    let args = [
        "audit",
        "prove",
        trail,
        "--record",
        record,
        "--key",
        "writer.key",
    ];
    let (code, text) = capability(dir, &[&args[..], &["--out", out]].concat());
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("{out}: writer replica-1 record")),
        "{text}"
    );
}

#[test]
fn a_proof_checks_alone_and_names_a_wrong_key_a_forgery_and_another_record() {
    let (dir, lines) = setup("alone");
    prove(&dir, "trail.jsonl", "replica-1:3", "r3.tlog-proof");
    let proof = std::fs::read_to_string(dir.join("r3.tlog-proof")).unwrap();
    assert!(
        proof.starts_with("c2sp.org/tlog-proof@v1\nextra "),
        "{proof}"
    );
    assert!(proof.contains("\nindex 2\n"), "{proof}");
    assert!(proof.contains("\n\ncapability/replica-1\n7\n"), "{proof}");
    assert!(
        proof.contains("\n\u{2014} capability/replica-1 "),
        "{proof}"
    );

    // Without a file: the proof on standard output.
    let (code, text) = capability(
        &dir,
        &[
            "audit",
            "prove",
            "trail.jsonl",
            "--record",
            "replica-1:3",
            "--key",
            "writer.key",
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("c2sp.org/tlog-proof@v1\n"), "{text}");

    let check = |file: &str, key: &str, record: Option<&str>| {
        let mut args = vec!["audit", "check-proof", file, "--key", key];
        args.extend(record.map(|r| ["--record", r]).into_iter().flatten());
        capability(&dir, &args)
    };
    let (code, text) = check("r3.tlog-proof", "writer.key.pub", None);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("writer replica-1 record 3 is in the tree of 7 records"),
        "{text}"
    );
    let (code, text) = check("r3.tlog-proof", "writer.key.pub", Some(&lines[2]));
    assert_eq!(code, 0, "{text}");

    let (code, text) = check("r3.tlog-proof", "other.key.pub", None);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("wrong key: no signature of key capability/replica-1"),
        "{text}"
    );

    let (code, text) = check("r3.tlog-proof", "writer.key.pub", Some(&lines[4]));
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("the proof is for another record (writer \"replica-1\" record 3)"),
        "{text}"
    );

    // The checkpoint's size changed under its signature.
    let forged = proof.replace("\ncapability/replica-1\n7\n", "\ncapability/replica-1\n8\n");
    std::fs::write(dir.join("forged.tlog-proof"), forged).unwrap();
    let (code, text) = check("forged.tlog-proof", "writer.key.pub", None);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("forged signature: "), "{text}");

    // The record in the proof rewritten (the extra line): not in the signed tree.
    let mut rewritten: Value = serde_json::from_str(&lines[2]).unwrap();
    rewritten["tool"] = json!("rm");
    let extra = capability::audit::tlog::encoding::base64(rewritten.to_string().as_bytes());
    let edited: String = proof
        .lines()
        .map(|l| {
            if l.starts_with("extra ") {
                format!("extra {extra}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(dir.join("edited.tlog-proof"), edited).unwrap();
    let (code, text) = check("edited.tlog-proof", "writer.key.pub", None);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("does not lead to the signed root"), "{text}");

    // `--out` never replaces a file without `--force`, nor writes through a symbolic link.
    let again = [
        "audit",
        "prove",
        "trail.jsonl",
        "--record",
        "replica-1:3",
        "--key",
        "writer.key",
        "--out",
        "r3.tlog-proof",
    ];
    let (code, text) = capability(&dir, &again);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--force"), "{text}");
    let (code, text) = capability(&dir, &[&again[..], &["--force"]].concat());
    assert_eq!(code, 0, "{text}");
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("link.tlog-proof")).unwrap();
    let link = [&again[..8], &["link.tlog-proof"]].concat();
    let (code, text) = capability(&dir, &link);
    assert_eq!(code, 2, "{text}");
    assert!(!dir.join("elsewhere").exists(), "written through the link");

    // A record that is not there, a malformed --record.
    let (code, text) = capability(
        &dir,
        &[
            "audit",
            "prove",
            "trail.jsonl",
            "--record",
            "replica-1:9",
            "--key",
            "writer.key",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("has no record 9"), "{text}");
    let (code, text) = capability(
        &dir,
        &[
            "audit",
            "prove",
            "trail.jsonl",
            "--record",
            "3",
            "--key",
            "writer.key",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("is not a record: <writer>:<seq>"), "{text}");
}

#[test]
fn consistency_shows_growth_and_names_a_cut_a_rewrite_and_a_fork() {
    let (dir, lines) = setup("consistency");
    prove(&dir, "early.jsonl", "replica-1:2", "old.tlog-proof");
    prove(&dir, "trail.jsonl", "replica-1:6", "new.tlog-proof");
    prove(
        &dir,
        "rewritten.jsonl",
        "replica-1:6",
        "rewritten.tlog-proof",
    );
    let consistency = |old: &str, new: &str, trail: &str| {
        capability(
            &dir,
            &[
                "audit",
                "consistency",
                old,
                new,
                "--trail",
                trail,
                "--key",
                "writer.key.pub",
            ],
        )
    };
    let (code, text) = consistency("old.tlog-proof", "new.tlog-proof", "trail.jsonl");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("the tree of 7 records extends the tree of 4, both signed by the key"),
        "{text}"
    );

    // The tail cut after the newer checkpoint.
    let cut: String = lines[..5].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("cut.jsonl"), cut).unwrap();
    let (code, text) = consistency("old.tlog-proof", "new.tlog-proof", "cut.jsonl");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("records were cut off since it was signed"),
        "{text}"
    );
    let (code, text) = consistency("new.tlog-proof", "old.tlog-proof", "trail.jsonl");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("fewer than the 7 of the older one"), "{text}");

    // Record 2 rewritten, the chain computed again and signed again.
    let (code, text) = consistency("old.tlog-proof", "rewritten.tlog-proof", "rewritten.jsonl");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("the tree of 7 records does not extend the tree of 4"),
        "{text}"
    );
    let (code, text) = consistency("old.tlog-proof", "new.tlog-proof", "rewritten.jsonl");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("rewritten since it was signed"), "{text}");

    // A fork: two roots signed for 7 records.
    let (code, text) = consistency("new.tlog-proof", "rewritten.tlog-proof", "trail.jsonl");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("fork: two different roots are signed for the tree of 7"),
        "{text}"
    );
}

#[test]
fn proofs_and_checkpoints_check_out_with_pymerkle_and_cryptography() {
    let (dir, _) = setup("python");
    let mut files = Vec::new();
    for seq in 1..=7 {
        let file = format!("r{seq}.tlog-proof");
        prove(&dir, "trail.jsonl", &format!("replica-1:{seq}"), &file);
        files.push(file);
    }
    // One proof hash replaced: pymerkle must refuse it.
    let proof = std::fs::read_to_string(dir.join("r3.tlog-proof")).unwrap();
    let mut lines: Vec<&str> = proof.lines().collect();
    let zero = format!("{}=", "A".repeat(43));
    lines[3] = &zero;
    std::fs::write(dir.join("tampered.tlog-proof"), lines.join("\n") + "\n").unwrap();
    files.push("tampered.tlog-proof".to_owned());
    let public = std::fs::read_to_string(dir.join("writer.key.pub")).unwrap();
    let python = support::auth::python_bin()
        .expect("the tests' Python environment")
        .join("python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/tlog_check.py");
    let output = Command::new(python)
        .current_dir(&dir)
        .arg(script)
        .arg("trail.jsonl")
        .arg(public.trim())
        .args(&files)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), 8, "{stdout}");
    let tampered = &results[7];
    assert_ne!(tampered["inclusion"], "ok", "{tampered}");
    assert_eq!(tampered["same_path_as_pymerkle"], false, "{tampered}");
    assert_eq!(tampered["signature"], "ok", "{tampered}");
    for result in &results[..7] {
        assert_eq!(result["root_matches_pymerkle"], true, "{result}");
        assert_eq!(result["same_path_as_pymerkle"], true, "{result}");
        assert_eq!(result["inclusion"], "ok", "{result}");
        assert_eq!(result["signature"], "ok", "{result}");
    }
}
