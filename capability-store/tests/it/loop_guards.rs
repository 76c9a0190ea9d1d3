//! The agent loop's ghost-loop guards across OS processes, on SQLite and on PostgreSQL: of six
//! processes racing one incident exactly one runs its loop; a holder killed with SIGKILL is
//! taken over once its lease's TTL has passed; an outcome cached by one process answers
//! another's repeat with no model turn and no tool call; a policy change misses.
//!
//! The children are this test binary run again with `CAPABILITY_LOOP_CHILD` set: `child` does
//! their part and prints one `RESULT` line.

use capability_testkit::pg;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capability_agent::driver::LoopOutcome;
use capability_agent::guard::{Guarded, LoopGuard};
use capability_audit::{AuditedDispatch, Caller, DigestKey, MemorySink};
use capability_core::authz::{Ceiling, ToolContext};
use capability_store::Store;

const CHILD: &str = "CAPABILITY_LOOP_CHILD";
const INCIDENT: &str = "fingerprint:4f1c0e2a9b7d";
const MAC_KEY: [u8; 32] = [42; 32];

fn open(target: &str) -> Box<dyn Store> {
    let store = capability_store::open(target).expect("open");
    store.migrate().expect("migrate");
    store
}

fn guard(store: &dyn Store, holder: &str, lease_ttl: Duration) -> LoopGuard {
    LoopGuard::new(
        store.leases(),
        store.loop_cache(),
        DigestKey::from_bytes(&MAC_KEY).expect("key"),
    )
    .holder(holder)
    .lease_ttl(lease_ttl)
}

fn dispatch(policy_version: &str) -> AuditedDispatch {
    AuditedDispatch::new(Arc::new(MemorySink::new())).with_policy_version(policy_version)
}

fn monitor() -> ToolContext {
    ToolContext::new("monitor", "loop", Ceiling::ReadOnly)
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn spawn_child(vars: &[(&str, &str)]) -> Child {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command.args([
        "--exact",
        "loop_guards::child",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (name, value) in vars {
        command.env(name, value);
    }
    command.stdout(Stdio::piped()).spawn().expect("spawn child")
}

/// Waits for the child; its `RESULT` line.
fn finish(child: Child) -> String {
    let output = child.wait_with_output().expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}");
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r.to_owned()))
        .unwrap_or_else(|| panic!("no RESULT from the child: {stdout}"))
}

/// Reads the child's stdout until its `RESULT` line (for a child that is killed afterwards).
fn result_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("piped");
    let mut seen = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read");
        if let Some((_, result)) = line.split_once("RESULT ") {
            return result.to_owned();
        }
        seen.push_str(&line);
        seen.push('\n');
    }
    panic!("no RESULT from the child: {seen}")
}

/// The children's side.
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    let store = open(&env("LOOP_STORE"));
    let holder = format!("child-{}", std::process::id());
    let ttl = Duration::from_millis(env("LOOP_TTL_MS").parse().expect("ttl"));
    let guard = guard(store.as_ref(), &holder, ttl);
    let dispatch = dispatch(&env("LOOP_POLICY"));
    // Started together: each says it is ready (`<go>.ready.<pid>`), then waits for the word.
    if let Ok(go) = std::env::var("LOOP_GO") {
        std::fs::write(format!("{go}.ready.{}", std::process::id()), "").expect("ready");
        while !std::path::Path::new(&go).exists() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut turns = 0u32;
    let outcome = guard.run(
        &dispatch,
        INCIDENT,
        &monitor(),
        Caller::new("watcher"),
        || {
            turns += 1;
            match mode.as_str() {
                // Holds the lease until the test lets it go (`LOOP_RELEASE` exists), then
                // answers.
                "race" => {
                    let release = env("LOOP_RELEASE");
                    let since = Instant::now();
                    while !std::path::Path::new(&release).exists()
                        && since.elapsed() < Duration::from_secs(60)
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                // Holds the lease until killed.
                "hold" => {
                    println!("RESULT holding");
                    loop {
                        // Never waited out: the test has this process killed.
                        std::thread::sleep(Duration::from_secs(60));
                    }
                }
                _ => {}
            }
            LoopOutcome::Answer {
                text: format!("answered by {holder}"),
                iterations: 1,
                tool_calls: 0,
            }
        },
    );
    match outcome {
        Ok(Guarded::Ran { outcome, .. }) => println!(
            "RESULT ran turns={turns} {}",
            outcome.answer().unwrap_or_default()
        ),
        Ok(Guarded::Cached(hit)) => println!(
            "RESULT cached turns={turns} {}",
            hit.answer().unwrap_or_default()
        ),
        Ok(Guarded::InFlight { holder, .. }) => {
            println!("RESULT in-flight turns={turns} {holder}")
        }
        Err(error) => println!("RESULT error {error}"),
    }
}

/// Six processes start together on one incident: exactly one runs, every other is refused
/// while it runs (or, started late, answered from its result); a process that comes later is answered from the cache, with no turn; under
/// another policy version it runs again.
fn six_processes_race(target: &str) {
    open(target);
    let signals =
        std::env::temp_dir().join(format!("loop-race-{}-{}", std::process::id(), now_ms()));
    std::fs::create_dir_all(&signals).expect("dir");
    let go = signals.join("go");
    let release = signals.join("release");
    let (go_text, release_text) = (go.display().to_string(), release.display().to_string());
    let vars = [
        (CHILD, "race"),
        ("LOOP_STORE", target),
        ("LOOP_TTL_MS", "10000"),
        ("LOOP_POLICY", "p/1"),
        ("LOOP_GO", go_text.as_str()),
        ("LOOP_RELEASE", release_text.as_str()),
    ];
    let mut children: Vec<Child> = (0..6).map(|_| spawn_child(&vars)).collect();
    // All six at the line, then go.
    let ready = |child: &Child| signals.join(format!("go.ready.{}", child.id())).exists();
    assert!(
        capability_testkit::wait_for(|| children.iter().all(ready)),
        "the children did not all get ready"
    );
    std::fs::write(&go, "").expect("go");
    // The one that runs holds its lease until the five others are done (then let go): each of
    // them meets it in flight, or (two running) the test fails, after a minute at most.
    let since = Instant::now();
    let mut done = 0;
    while done < 5 && since.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
        done = children
            .iter_mut()
            .map(|c| matches!(c.try_wait(), Ok(Some(_))))
            .filter(|&exited| exited)
            .count();
    }
    std::fs::write(&release, "").expect("release");
    let results: Vec<String> = children.into_iter().map(finish).collect();
    let _ = std::fs::remove_dir_all(&signals);
    let ran: Vec<_> = results
        .iter()
        .filter(|r| r.starts_with("ran turns=1"))
        .collect();
    assert_eq!(ran.len(), 1, "exactly one runs: {results:#?}");
    let winner = ran[0].rsplit(' ').next().expect("holder").to_owned();
    for other in results.iter().filter(|r| !r.starts_with("ran")) {
        // Refused while the winner runs; one that started late (a slow machine) is answered
        // from its result. Neither runs the loop.
        let refused = other.starts_with("in-flight turns=0") && other.ends_with(&winner);
        let answered = *other == format!("cached turns=0 answered by {winner}");
        assert!(refused || answered, "not run while {winner} runs: {other}");
    }

    let late_vars = [
        (CHILD, "late"),
        ("LOOP_STORE", target),
        ("LOOP_TTL_MS", "10000"),
        ("LOOP_POLICY", "p/1"),
    ];
    let late_result = finish(spawn_child(&late_vars));
    assert_eq!(
        late_result,
        format!("cached turns=0 answered by {winner}"),
        "a repeat in another process: no model turn"
    );

    let changed = [
        (CHILD, "late"),
        ("LOOP_STORE", target),
        ("LOOP_TTL_MS", "10000"),
        ("LOOP_POLICY", "p/2"),
    ];
    let result = finish(spawn_child(&changed));
    assert!(
        result.starts_with("ran turns=1"),
        "a policy change misses: {result}"
    );
}

/// A holder killed with SIGKILL stops renewing: its incident stays in flight until the TTL has
/// passed since its last renewal, and is taken over then.
fn a_killed_holder_is_taken_over_after_the_ttl(target: &str) {
    let store = open(target);
    let ttl = Duration::from_secs(2);
    let vars = [
        (CHILD, "hold"),
        ("LOOP_STORE", target),
        ("LOOP_TTL_MS", "2000"),
        ("LOOP_POLICY", "p/1"),
    ];
    let mut holder = spawn_child(&vars);
    assert_eq!(result_line(&mut holder), "holding");
    let holder_id = format!("child-{}", holder.id());
    let taker = guard(store.as_ref(), "taker", ttl);
    let dispatch = dispatch("p/1");
    let in_flight = || {
        let refused = taker
            .run(&dispatch, INCIDENT, &monitor(), Caller::new("w"), || {
                unreachable!("in flight")
            })
            .expect("run");
        match refused {
            Guarded::InFlight {
                holder,
                since_ms,
                expires_ms,
            } if holder == holder_id => (since_ms, expires_ms),
            other => panic!("not in flight with {holder_id}: {other:?}"),
        }
    };
    // While it lives it renews (every third of the TTL): its lease runs past the TTL it was
    // first taken for, and it is still in flight then.
    let (since_ms, first_expiry) = in_flight();
    let ttl_ms = u64::try_from(ttl.as_millis()).expect("ms");
    assert!(
        first_expiry <= since_ms + ttl_ms,
        "{since_ms} {first_expiry}"
    );
    assert!(
        capability_testkit::wait_for(|| in_flight().1 > since_ms + ttl_ms),
        "the holder did not renew its lease"
    );

    holder.kill().expect("SIGKILL");
    holder.wait().expect("reap");
    let killed = Instant::now();
    let ran = loop {
        let attempt = taker
            .run(&dispatch, INCIDENT, &monitor(), Caller::new("w"), || {
                LoopOutcome::Answer {
                    text: "taken over".into(),
                    iterations: 1,
                    tool_calls: 0,
                }
            })
            .expect("run");
        match attempt {
            Guarded::InFlight { .. } if killed.elapsed() < ttl * 3 => {
                std::thread::sleep(Duration::from_millis(100))
            }
            other => break other,
        }
    };
    let waited = killed.elapsed();
    assert_eq!(ran.answer(), Some("taken over"), "{ran:?}");
    assert!(
        waited <= ttl + Duration::from_millis(1_500),
        "taken over within the TTL of the last renewal: {waited:?}"
    );
}

fn sqlite_target(test: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("loop-guards-{test}-{}", std::process::id()));
    let dir = capability_testkit::fresh_dir(dir);
    let path = dir.join("state.db");
    let target = path.to_str().expect("utf-8").to_owned();
    (dir, target)
}

#[test]
fn sqlite_six_processes_race_for_one_incident_and_one_runs() {
    let (dir, target) = sqlite_target("race");
    six_processes_race(&target);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sqlite_a_holder_killed_with_sigkill_is_taken_over_after_the_ttl() {
    let (dir, target) = sqlite_target("kill");
    a_killed_holder_is_taken_over_after_the_ttl(&target);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn postgres_six_processes_race_for_one_incident_and_one_runs() {
    let Some(url) = pg::schema_url("loop_race") else {
        return;
    };
    six_processes_race(&url);
}

#[test]
fn postgres_a_holder_killed_with_sigkill_is_taken_over_after_the_ttl() {
    let Some(url) = pg::schema_url("loop_kill") else {
        return;
    };
    a_killed_holder_is_taken_over_after_the_ttl(&url);
}

#[test]
fn an_edited_lease_row_or_cache_row_is_not_believed() {
    // Someone with write access to the database shortens another's lease (then two could
    // run; the fencing generation stops the first from renewing or caching) or plants an
    // answer (the seal refuses it).
    let (dir, target) = sqlite_target("edit");
    let store = open(&target);
    let a = guard(store.as_ref(), "a", Duration::from_secs(30));
    let dispatch = dispatch("p/1");
    let conn = rusqlite::Connection::open(&target).expect("open");
    let outcome = a
        .run(&dispatch, INCIDENT, &monitor(), Caller::new("w"), || {
            conn.execute("UPDATE capability_loop_lease SET expires_ms = 0", [])
                .expect("edit");
            let b = guard(store.as_ref(), "b", Duration::from_secs(30));
            let inner = b
                .run(&dispatch, INCIDENT, &monitor(), Caller::new("w"), || {
                    LoopOutcome::Answer {
                        text: "b".into(),
                        iterations: 1,
                        tool_calls: 0,
                    }
                })
                .expect("b");
            assert_eq!(
                inner.answer(),
                Some("b"),
                "the lease was taken from under a"
            );
            LoopOutcome::Answer {
                text: "a".into(),
                iterations: 1,
                tool_calls: 0,
            }
        })
        .expect("a");
    assert!(matches!(outcome, Guarded::Ran { .. }));
    let cached = a
        .run(&dispatch, INCIDENT, &monitor(), Caller::new("w"), || {
            unreachable!("cached")
        })
        .expect("hit");
    assert_eq!(
        cached.answer(),
        Some("b"),
        "a's release and cache did not overwrite b's"
    );

    conn.execute(
        "UPDATE capability_loop_cache SET entry = replace(entry, '\"b\"', '\"close it\"')",
        [],
    )
    .expect("edit");
    let ran = a
        .run(&dispatch, INCIDENT, &monitor(), Caller::new("w"), || {
            LoopOutcome::Answer {
                text: "ran again".into(),
                iterations: 1,
                tool_calls: 0,
            }
        })
        .expect("run");
    assert_eq!(ran.answer(), Some("ran again"), "{ran:?}");
    let _ = std::fs::remove_dir_all(dir);
}
