//! `verify_jsonl` checks the exact bytes of each line: a line must be the canonical JSON of the
//! record it parses to, so a line re-encoded differently, or carrying a duplicate key (serde_json
//! keeps the last value silently), is refused even when its hash still matches.

use std::path::PathBuf;
use std::sync::Arc;

use capability::audit::{
    AuditRecord, AuditedDispatch, Caller, FlushPolicy, JsonlSink, Outcome, verify_jsonl,
};
use serde_json::json;

use crate::common;
use common::{list_pods, monitor};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit_strict_jsonl");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// A trail of four calls (eight records: an intent and an outcome each), and its lines.
fn trail(name: &str) -> (PathBuf, Vec<String>) {
    let path = scratch(name);
    {
        let sink = Arc::new(JsonlSink::open(&path, FlushPolicy::EveryRecord).expect("open"));
        let dispatch = AuditedDispatch::new(sink);
        for i in 0..4 {
            let _: Outcome<u32, String> = dispatch.call(
                &monitor("s"),
                Caller::new("watcher"),
                &list_pods(),
                &json!({ "ns": "prod", "i": i }),
                || Ok(i),
            );
        }
    }
    let report = verify_jsonl(&path).expect("readable");
    assert_eq!((report.records, report.problem.clone()), (8, None));
    let text = std::fs::read_to_string(&path).expect("read");
    (path, text.lines().map(str::to_owned).collect())
}

fn rewrite(path: &PathBuf, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write");
}

/// Asserts that the trail is refused at `line`, with a message naming it and containing `what`.
fn refused_at(path: &PathBuf, line: u64, what: &str) {
    let report = verify_jsonl(path).expect("readable");
    let problem = report.problem.expect("refused");
    assert_eq!(problem.line, line, "{problem}");
    let message = problem.to_string();
    assert!(message.starts_with(&format!("line {line}: ")), "{message}");
    assert!(message.contains(what), "{message}");
    assert_eq!(report.records, line - 1);
}

#[test]
fn a_non_canonical_line_is_refused() {
    let (path, lines) = trail("non_canonical.jsonl");
    let record: AuditRecord = serde_json::from_str(&lines[1]).expect("a record");
    assert_eq!(record.to_line(), lines[1]);

    // The same record, pretty-printed on one line: spaces after `:` and `,`.
    let mut spaced = lines.clone();
    spaced[1] = lines[1].replace("\",\"", "\", \"");
    assert_ne!(spaced[1], lines[1]);
    rewrite(&path, &spaced);
    refused_at(&path, 2, "canonical");

    // The same record with its keys in declaration order (serde_json's), not sorted.
    let mut reordered = lines.clone();
    reordered[1] = serde_json::to_string(&record).expect("json");
    assert_ne!(reordered[1], lines[1]);
    rewrite(&path, &reordered);
    refused_at(&path, 2, "canonical");

    // The same string, escaped differently: `\u0070` is `p`.
    let mut escaped = lines.clone();
    escaped[2] = lines[2].replacen("\"prod\"", "\"\\u0070rod\"", 1);
    assert_ne!(escaped[2], lines[2]);
    rewrite(&path, &escaped);
    refused_at(&path, 3, "canonical");

    // A trailing space.
    let mut trailing = lines.clone();
    trailing[3].push(' ');
    rewrite(&path, &trailing);
    refused_at(&path, 4, "canonical");

    // A carriage return (CRLF line ending).
    let mut crlf = lines.clone();
    crlf[0].push('\r');
    rewrite(&path, &crlf);
    refused_at(&path, 1, "canonical");
}

#[test]
fn a_line_with_a_duplicate_key_is_refused() {
    let (path, lines) = trail("duplicate.jsonl");

    // At the top level: a second `agent` after the first.
    let mut top = lines.clone();
    top[1] = lines[1].replacen(
        "\"agent\":\"watcher\"",
        "\"agent\":\"watcher\",\"agent\":\"watcher\"",
        1,
    );
    assert_ne!(top[1], lines[1]);
    rewrite(&path, &top);
    refused_at(&path, 2, "agent");

    // Inside `input`: `{"i":1,"i":1,...}`. serde_json keeps the last value, so the record and
    // its hash are unchanged; only the bytes show it.
    let mut nested = lines.clone();
    nested[2] = lines[2].replacen("\"input\":{\"i\":1,", "\"input\":{\"i\":1,\"i\":1,", 1);
    assert_ne!(nested[2], lines[2]);
    let parsed: AuditRecord = serde_json::from_str(&nested[2]).expect("serde_json takes it");
    assert_eq!(parsed.hash, parsed.compute_hash(), "the hash still matches");
    rewrite(&path, &nested);
    refused_at(&path, 3, "duplicate key `$.input.i`");

    // A duplicate whose first value is the one an attacker wants a naive reader to see: a
    // reader that keeps the first value sees `"ns":"dev"`, serde_json sees `"ns":"prod"`.
    let mut shadow = lines.clone();
    shadow[2] = lines[2].replacen("\"ns\":\"prod\"", "\"ns\":\"dev\",\"ns\":\"prod\"", 1);
    assert_ne!(shadow[2], lines[2]);
    rewrite(&path, &shadow);
    refused_at(&path, 3, "duplicate key `$.input.ns`");
}
