//! `capability proxy --checkpoint-key K --witness W1 --witness W2` on a JSON Lines trail: each
//! tree checkpoint the running proxy writes is cosigned by real `capability audit witness`
//! processes and stored in the trail by the proxy itself, so `audit verify --witnesses 2`
//! passes while it runs; the consistency proofs, computed from what the writer keeps, are
//! accepted checkpoint after checkpoint (a witness refuses a wrong one); a witness that is down
//! neither blocks nor fails a call, and verify names it; a witness holding a checkpoint of an
//! earlier run gets a proof read once from the trail, then the incremental ones.

#![cfg(unix)]

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use capability::audit::tlog::SignedCheckpoint;
use capability_testkit::wait_for;
use serde_json::json;

use crate::proxy_common::{Proxied, proxy_args, scratch};
use crate::support;
use crate::trails::{WitnessProcess, capability, start_witness};

const POLICY: &str = r#"
[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
"#;

/// The witnessed log: the proxy's writer `proxy:sh/operator`, under the key `audit.key`.
const LOG: &str = "capability/proxy:sh/operator=audit.key.pub";

/// An `sh` server of 2025-11-25 with one tool, `peek`, that answers `called`.
fn sh_server(dir: &Path) -> support::McpServer {
    let script = r#"reply() { printf '{"jsonrpc":"2.0","id":%s,%s}\n' "$1" "$2"; }
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{]*{[^{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) reply "$id" '"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1.0.0"}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{"tools":[{"name":"peek","inputSchema":{"type":"object"}}]}' ;;
    *'"method":"tools/call"'*) reply "$id" '"result":{"content":[{"type":"text","text":"called"}]}' ;;
    *'"id":'*) reply "$id" '"error":{"code":-32601,"message":"Method not found"}' ;;
  esac
done"#;
    support::McpServer {
        name: "sh",
        program: "sh".into(),
        args: vec![
            "-c".to_owned(),
            format!("cd '{}' && {{ {script}\n}}", dir.display()),
        ],
        env: Vec::new(),
    }
}

fn setup(name: &str) -> std::path::PathBuf {
    let dir = scratch(name, POLICY);
    for key in ["audit.key", "w1.key", "w2.key"] {
        let (code, text) = capability(&dir, &["keygen", "--out", key]);
        assert_eq!(code, 0, "{text}");
    }
    dir
}

fn witness(dir: &Path, key: &str) -> WitnessProcess {
    start_witness(dir, key, &format!("{key}.state.json"), LOG)
}

async fn proxy(dir: &Path, witnesses: &[&str], stderr: Stdio) -> Proxied {
    proxy_on(dir, "trail.jsonl", witnesses, stderr).await
}

async fn proxy_on(dir: &Path, audit: &str, witnesses: &[&str], stderr: Stdio) -> Proxied {
    // A checkpoint at least every second, so the tests wait a second, not ten.
    let mut extra = vec!["--checkpoint-key", "audit.key", "--checkpoint-every", "1"];
    for url in witnesses {
        extra.extend(["--witness", url]);
    }
    let trail = match audit.starts_with("postgres") {
        true => std::path::PathBuf::from(audit),
        false => dir.join(audit),
    };
    let mut args = proxy_args(dir, "operator", "sh", &trail, &extra, &sh_server(dir));
    // The key's path relative to the test's folder.
    let at = args.iter().position(|a| a == "audit.key").expect("the key");
    args[at] = dir.join("audit.key").display().to_string();
    Proxied::start_with(&args, stderr).await
}

fn verify(dir: &Path, witness_keys: &[&str], needed: &str) -> (i32, String) {
    let mut args = vec!["audit", "verify", "trail.jsonl", "--key", "audit.key.pub"];
    for key in witness_keys {
        args.extend(["--witness-key", key]);
    }
    if !witness_keys.is_empty() {
        args.extend(["--witnesses", needed]);
    }
    capability(dir, &args)
}

/// Waits (the writer checkpoints every second, idle or not) until `done`.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    (0..3).any(|_| wait_for(&mut done))
}

/// The trail's records, and the largest tree each witness key id cosigned in it.
fn cosigned_sizes(dir: &Path) -> (u64, Vec<u64>) {
    let text = std::fs::read_to_string(dir.join("trail.jsonl")).expect("the trail");
    let mut records = 0;
    let mut sizes = std::collections::BTreeMap::<[u8; 4], u64>::new();
    for line in text.lines() {
        if line.starts_with("{\"checkpoint\"") {
            continue;
        }
        if !line.starts_with("{\"tree_checkpoint\"") {
            records += 1;
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line).expect("JSON");
        let note = value["tree_checkpoint"]["note"].as_str().expect("a note");
        let note = SignedCheckpoint::parse(note).expect("a signed note");
        for signature in note.signatures.iter().skip(1) {
            let size = sizes.entry(signature.key_id).or_default();
            *size = (*size).max(note.head.size);
        }
    }
    (records, sizes.into_values().collect())
}

async fn calls(proxied: &Proxied, n: usize) {
    for _ in 0..n {
        let started = Instant::now();
        proxied.call("peek", json!({})).await.expect("runs");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "a call waited {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_running_proxys_checkpoints_are_cosigned_by_its_witnesses_and_verify_counts_them() {
    let dir = setup("witness-feed-two");
    let (w1, w2) = (witness(&dir, "w1.key"), witness(&dir, "w2.key"));
    let proxied = proxy(&dir, &[&w1.url, &w2.url], Stdio::inherit()).await;
    let both = ["w1.key.pub", "w2.key.pub"];
    let mut last = 0;
    for round in 0..3 {
        calls(&proxied, 3 + round).await;
        let (records, _) = cosigned_sizes(&dir);
        // While the proxy runs: its latest checkpoint cosigned by both, stored by the proxy.
        let cosigned = eventually(|| {
            let (_, sizes) = cosigned_sizes(&dir);
            sizes.len() == 2
                && sizes.iter().all(|s| *s >= records)
                && verify(&dir, &both, "2").0 == 0
        });
        let (_, sizes) = cosigned_sizes(&dir);
        assert!(
            cosigned,
            "round {round}: {records} records, cosigned {sizes:?}: {}",
            verify(&dir, &both, "2").1
        );
        // Each witness took a proof from the size it held: the cosigned tree grew.
        assert!(sizes.iter().all(|s| *s > last), "{sizes:?} after {last}");
        last = sizes.iter().copied().min().unwrap_or(0);
    }
    assert!(proxied.close().await.success());
    assert_eq!(verify(&dir, &[], "").0, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_witness_down_fails_no_call_and_verify_names_it() {
    let dir = setup("witness-feed-down");
    let w1 = witness(&dir, "w1.key");
    // A port nobody listens on.
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("address"))
    };
    let mut proxied = proxy(&dir, &[&w1.url, &down], Stdio::piped()).await;
    let stderr = proxied.child.stderr.take().expect("stderr");
    calls(&proxied, 4).await;
    let (records, _) = cosigned_sizes(&dir);
    let one = eventually(|| {
        cosigned_sizes(&dir)
            .1
            .first()
            .is_some_and(|s| *s >= records)
            && verify(&dir, &["w1.key.pub"], "1").0 == 0
    });
    assert!(one, "{}", verify(&dir, &["w1.key.pub"], "1").1);
    let (code, text) = verify(&dir, &[], "");
    assert_eq!(code, 0, "{text}");
    let (code, text) = verify(&dir, &["w1.key.pub", "w2.key.pub"], "2");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("w2.key.pub (no cosignature)") && text.contains("not witnessed"),
        "{text}"
    );
    assert!(proxied.close().await.success());
    let mut said = String::new();
    use tokio::io::AsyncReadExt as _;
    let mut stderr = stderr;
    stderr.read_to_string(&mut said).await.expect("stderr");
    assert!(
        said.contains("checkpoint not cosigned by this witness") && said.contains(&down),
        "{said}"
    );
    drop(w1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_witness_holding_an_earlier_runs_checkpoint_is_proven_from_the_trail_once() {
    let dir = setup("witness-feed-restart");
    let w1 = witness(&dir, "w1.key");
    // A first run without the witness, a second with it.
    let proxied = proxy(&dir, &[], Stdio::inherit()).await;
    calls(&proxied, 3).await;
    assert!(proxied.close().await.success());
    let (code, text) = capability(
        &dir,
        &[
            "audit",
            "witness-submit",
            "trail.jsonl",
            "--witness",
            &w1.url,
        ],
    );
    assert_eq!(code, 0, "{text}");
    let (first, sizes) = cosigned_sizes(&dir);
    assert_eq!(sizes, vec![first]);
    // More records than the witness holds, so the next run starts past its size.
    let proxied = proxy(&dir, &[], Stdio::inherit()).await;
    calls(&proxied, 2).await;
    assert!(proxied.close().await.success());

    let proxied = proxy(&dir, &[&w1.url], Stdio::inherit()).await;
    let mut last = first;
    for round in 0..2 {
        calls(&proxied, 2 + round).await;
        let (records, _) = cosigned_sizes(&dir);
        let grown = eventually(|| {
            cosigned_sizes(&dir)
                .1
                .first()
                .is_some_and(|s| *s >= records)
                && verify(&dir, &["w1.key.pub"], "1").0 == 0
        });
        let (_, sizes) = cosigned_sizes(&dir);
        assert!(
            grown,
            "round {round}: {records} records, cosigned {sizes:?}"
        );
        assert!(sizes[0] > last, "{sizes:?} after {last}");
        last = sizes[0];
    }
    assert!(proxied.close().await.success());
}

#[test]
fn witness_without_a_checkpoint_key_is_refused_saying_why() {
    let dir = setup("witness-feed-refused");
    let server = sh_server(&dir);
    let run = |audit: &Path, extra: &[&str]| {
        let args = proxy_args(&dir, "operator", "sh", audit, extra, &server);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        capability(&dir, &args)
    };
    let (code, text) = run(
        &dir.join("trail.jsonl"),
        &["--witness", "http://127.0.0.1:9"],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--checkpoint-key <FILE>"), "{text}");
    assert!(!dir.join("trail.jsonl").exists());
}

/// The largest tree any checkpoint of the trail signs.
fn checkpointed_size(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("trail.jsonl")).unwrap_or_default();
    text.lines()
        .filter(|line| line.starts_with("{\"tree_checkpoint\""))
        .filter_map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).ok()?;
            let note = SignedCheckpoint::parse(value["tree_checkpoint"]["note"].as_str()?).ok()?;
            Some(note.head.size)
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test(flavor = "current_thread")]
async fn checkpoint_every_bounds_an_idle_writers_wait_and_is_refused_out_of_range() {
    let dir = setup("witness-feed-every");
    // `--checkpoint-every 1`: the calls' records are signed within about a second of the last
    // one, the proxy idle (the default, 10 s, would leave them unsigned for that long).
    let proxied = proxy(&dir, &[], Stdio::inherit()).await;
    calls(&proxied, 2).await;
    let (records, _) = cosigned_sizes(&dir);
    let idle = Instant::now();
    while checkpointed_size(&dir) < records && idle.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        checkpointed_size(&dir) >= records,
        "{records} records, none signed {:?} after the last call",
        idle.elapsed()
    );
    assert!(proxied.close().await.success());
    assert_eq!(verify(&dir, &[], "").0, 0);

    let server = sh_server(&dir);
    let trail = dir.join("other.jsonl");
    for (extra, said) in [
        (
            &["--checkpoint-key", "audit.key", "--checkpoint-every", "0"][..],
            "1..=10",
        ),
        (
            &["--checkpoint-key", "audit.key", "--checkpoint-every", "11"],
            "1..=10",
        ),
        (&["--checkpoint-every", "1"], "--checkpoint-key <FILE>"),
    ] {
        let args = proxy_args(&dir, "operator", "sh", &trail, extra, &server);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, text) = capability(&dir, &args);
        assert_eq!(code, 2, "{extra:?}: {text}");
        assert!(text.contains(said), "{extra:?}: {text}");
        assert!(!trail.exists(), "{extra:?}: a trail opened");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_running_proxys_sqlite_checkpoints_are_cosigned_and_stored_over_the_stored_note() {
    let dir = setup("witness-feed-sqlite");
    let (code, text) = capability(&dir, &["db", "migrate", "state.db"]);
    assert_eq!(code, 0, "{text}");
    store_fed(&dir, "state.db").await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_running_proxys_postgres_checkpoints_are_cosigned_and_stored_over_the_stored_note() {
    // PostgreSQL's client blocks: its schema is made on a thread of its own.
    let schema = std::thread::spawn(|| capability_testkit::pg::schema_url("cli_witness_feed"));
    let Some(url) = schema.join().expect("a schema") else {
        return;
    };
    let dir = setup("witness-feed-postgres");
    let (code, text) = capability(&dir, &["db", "migrate", &url]);
    assert_eq!(code, 0, "{text}");
    store_fed(&dir, &url).await;
}

/// A proxy on the store `target` with a witness: its checkpoints cosigned and stored while it
/// runs, `verify --witnesses 1` passing.
async fn store_fed(dir: &Path, target: &str) {
    // A store's writer is named after the process (`proxy:sh/operator/<pid>-<start>`): the
    // witness is started on a port given to the proxy once the writer's name is known.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let proxied = proxy_on(dir, target, &[&url], Stdio::inherit()).await;
    calls(&proxied, 3).await;
    let opened = if target.starts_with("postgres") {
        target.to_owned()
    } else {
        dir.join(target).display().to_string()
    };
    // Read on a thread of its own: PostgreSQL's client blocks, and this test is async.
    let read = || {
        let opened = opened.clone();
        std::thread::spawn(move || {
            let store = capability_store::open(&opened).expect("open");
            store.read_trail().expect("read")
        })
        .join()
        .expect("read")
    };
    let writer = read().records[0].writer.clone();
    let log = format!("capability/{writer}=audit.key.pub");
    let listen = format!("127.0.0.1:{port}");
    let mut args = crate::trails::witness_args("w1.key", "w1.state.json", &log);
    args[3] = &listen;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capability"))
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawns");
    calls(&proxied, 2).await;
    let records = read().records.len() as u64;
    let verify = [
        "audit",
        "verify",
        target,
        "--key",
        "audit.key.pub",
        "--witness-key",
        "w1.key.pub",
    ];
    let cosigned = eventually(|| {
        let (code, _) = capability(dir, &verify);
        let notes = read().tree_checkpoints;
        code == 0
            && notes.iter().any(|n| {
                let note = SignedCheckpoint::parse(n).expect("a note");
                note.signatures.len() >= 2 && note.head.size >= records
            })
    });
    let (_, text) = capability(dir, &verify);
    assert!(cosigned, "{records} records: {text}");
    assert!(proxied.close().await.success());
    let _ = child.kill();
    let _ = child.wait();
}
