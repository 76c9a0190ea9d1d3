//! The ghost-loop guards in one process: a repeat answered from the cache with no model turn
//! and no tool call, a second loop of an incident refused while the first runs, a policy or
//! role change that misses, TTLs on a fake clock, a forged or copied entry refused, a lapsed
//! lease taken over and its old holder fenced, a panicking loop's lease released.

use crate::loop_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use capability_agent::driver::{AgentLoop, LoopOutcome, ToolExecutor, ToolSource};
use capability_agent::guard::{
    Acquire, CACHED_METHOD, FakeWallClock, GuardNote, Guarded, LeaseStore, LoopGuard, MemoryCache,
    MemoryLeases, ResultCache, STARTED_METHOD, WallClock,
};
use capability_audit::{AuditedDispatch, Caller, DigestKey, MemorySink, Verdict};
use capability_core::authz::{Policy, ToolContext};
use capability_mcp::Server;
use serde_json::{Value, json};

use loop_support::*;

const INCIDENT: &str = "alertname=DiskFull,instance=db-2";

fn context(policy: &str, role: &str) -> ToolContext {
    Policy::from_toml_str(policy)
        .expect("policy")
        .context(role, "s-1")
        .expect("role")
}

/// Counts the tool calls it runs.
#[derive(Default)]
struct Counting(AtomicU32);

impl ToolExecutor for Counting {
    fn call(&self, _: &str, _: &Value) -> Result<Value, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"used": "99%"}))
    }
}

struct Fixture {
    sink: Arc<MemorySink>,
    dispatch: AuditedDispatch,
    leases: Arc<MemoryLeases>,
    cache: Arc<MemoryCache>,
    clock: Arc<FakeWallClock>,
    key: DigestKey,
}

impl Fixture {
    fn new() -> Self {
        let (sink, dispatch) = dispatch(5);
        Fixture {
            sink,
            dispatch,
            leases: Arc::new(MemoryLeases::new()),
            cache: Arc::new(MemoryCache::new()),
            clock: Arc::new(FakeWallClock::at(1_700_000_000_000)),
            key: DigestKey::from_bytes(&[7; 32]).expect("key"),
        }
    }

    fn guard(&self) -> LoopGuard {
        LoopGuard::new(self.leases.clone(), self.cache.clone(), self.key.clone())
            .clock(self.clock.clone())
            .holder("replica-a")
    }
}

/// One real loop run: a tool call, then the answer. Returns the model's turns and the
/// executor's calls along with the guarded outcome.
fn run_loop(fx: &Fixture, guard: &LoopGuard, ctx: &ToolContext) -> (Guarded, usize, u32) {
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let executor = Counting::default();
    let mut model = Scripted::new([
        call("c1", "list_pods", json!({"namespace": "db"})),
        answer("db-2's disk is full"),
    ]);
    let caller = Caller::new("watcher").step("triage").incident("INC-1");
    let guarded = guard
        .run(&fx.dispatch, INCIDENT, ctx, caller, || {
            let mut messages = vec![capability_agent::Message::User("DiskFull".into())];
            AgentLoop::new(&fx.dispatch).run(
                &mut model,
                &mut messages,
                &ToolSource::new(&server, &tools),
                ctx,
                caller,
                &executor,
            )
        })
        .expect("guarded run");
    (guarded, model.turns(), executor.0.load(Ordering::SeqCst))
}

#[test]
fn a_repeat_is_answered_from_the_cache_with_no_model_turn_and_no_tool_call() {
    let fx = Fixture::new();
    let guard = fx.guard();
    let monitor = context(POLICY, "monitor");

    let (first, turns, calls) = run_loop(&fx, &guard, &monitor);
    assert_eq!((turns, calls), (2, 1), "the first alert runs the loop");
    let Guarded::Ran {
        calls: range,
        notes,
        ..
    } = &first
    else {
        panic!("ran: {first:?}")
    };
    assert!(notes.is_empty(), "{notes:?}");
    let range = range.clone().expect("its records' range");

    let (repeat, turns, calls) = run_loop(&fx, &guard, &monitor);
    assert_eq!(
        (turns, calls),
        (0, 0),
        "the repeat makes no model turn and no tool call"
    );
    let Guarded::Cached(hit) = &repeat else {
        panic!("cached: {repeat:?}")
    };
    assert_eq!(hit.answer(), Some("db-2's disk is full"));
    assert_eq!((hit.iterations, hit.tool_calls), (2, 1));
    assert_eq!(hit.calls.as_ref(), Some(&range));

    // On record: the start, the call (intent and outcome), and the hit naming the run's range.
    let records = fx.sink.records();
    let methods: Vec<_> = records.iter().map(|r| r.method.as_deref()).collect();
    assert_eq!(
        methods,
        [Some(STARTED_METHOD), None, None, Some(CACHED_METHOD)],
        "{records:#?}"
    );
    assert_eq!(
        (range.first_seq, range.last_seq),
        (records[0].seq, records[2].seq)
    );
    let hit_record = &records[3];
    assert_eq!(hit_record.verdict, Verdict::Allowed);
    assert_eq!(hit_record.incident_id.as_deref(), Some("INC-1"));
    assert_eq!(hit_record.reasons[0].code(), "cache_hit");
    assert!(
        hit_record.reasons[0]
            .message()
            .contains(&format!("records {}..={}", range.first_seq, range.last_seq)),
        "{}",
        hit_record.reasons[0].message()
    );
}

#[test]
fn a_second_loop_of_the_incident_does_not_start_while_the_first_runs() {
    let fx = Fixture::new();
    let guard = fx.guard();
    let other = LoopGuard::new(fx.leases.clone(), fx.cache.clone(), fx.key.clone())
        .clock(fx.clock.clone())
        .holder("replica-b");
    let monitor = context(POLICY, "monitor");
    let inside = Barrier::new(2);
    let done = Barrier::new(2);
    std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            guard
                .run(&fx.dispatch, INCIDENT, &monitor, Caller::new("a"), || {
                    inside.wait();
                    done.wait();
                    LoopOutcome::Answer {
                        text: "first".into(),
                        iterations: 1,
                        tool_calls: 0,
                    }
                })
                .expect("first")
        });
        inside.wait();
        let second = other
            .run(&fx.dispatch, INCIDENT, &monitor, Caller::new("b"), || {
                panic!("the second loop must not start")
            })
            .expect("second");
        match second {
            Guarded::InFlight {
                holder, since_ms, ..
            } => {
                assert_eq!(holder, "replica-a");
                assert_eq!(since_ms, fx.clock.now_ms());
            }
            other => panic!("in flight: {other:?}"),
        }
        done.wait();
        assert!(matches!(first.join().expect("first"), Guarded::Ran { .. }));
    });
    // Once the first is done, the second replica is answered from its result.
    let after = other
        .run(&fx.dispatch, INCIDENT, &monitor, Caller::new("b"), || {
            panic!("cached")
        })
        .expect("after");
    assert_eq!(after.answer(), Some("first"));
}

#[test]
fn a_policy_change_or_another_role_misses_the_cache() {
    let fx = Fixture::new();
    let guard = fx.guard();
    let monitor = context(POLICY, "monitor");
    run_loop(&fx, &guard, &monitor);
    assert!(matches!(
        run_loop(&fx, &guard, &monitor).0,
        Guarded::Cached(_)
    ));

    let changed = POLICY.replace("version = \"test/1\"", "version = \"test/2\"");
    let (after_change, turns, _) = run_loop(&fx, &guard, &context(&changed, "monitor"));
    assert!(
        matches!(after_change, Guarded::Ran { .. }),
        "{after_change:?}"
    );
    assert_eq!(turns, 2, "the loop ran again under the new policy");

    let (other_role, turns, _) = run_loop(&fx, &guard, &context(POLICY, "operator"));
    assert!(matches!(other_role, Guarded::Ran { .. }), "{other_role:?}");
    assert_eq!(turns, 2);

    // A dispatch's own version overrides the decider's: another version, another entry.
    let (_, dispatch) = dispatch(5);
    let dispatch = dispatch.with_policy_version("deployed/9");
    let hit = guard
        .run(&dispatch, INCIDENT, &monitor, Caller::new("w"), || {
            LoopOutcome::Answer {
                text: "under deployed/9".into(),
                iterations: 1,
                tool_calls: 0,
            }
        })
        .expect("run");
    assert!(matches!(hit, Guarded::Ran { .. }), "{hit:?}");
}

#[test]
fn without_a_policy_version_nothing_is_cached() {
    let fx = Fixture::new();
    let guard = fx.guard();
    let unversioned = context(&POLICY.replace("version = \"test/1\"", ""), "monitor");
    let (first, _, _) = run_loop(&fx, &guard, &unversioned);
    let Guarded::Ran { notes, .. } = first else {
        panic!("ran")
    };
    assert_eq!(notes, [GuardNote::Unversioned]);
    let (second, turns, _) = run_loop(&fx, &guard, &unversioned);
    assert!(matches!(second, Guarded::Ran { .. }));
    assert_eq!(
        turns, 2,
        "ran again: a policy change could not be told apart"
    );
}

/// The workspace's one clock (`capability_core::clock`, which the gate and the HTTP edge read
/// too) is a guard's clock: a cached answer expires when a `ManualClock` is moved past its TTL.
#[test]
fn a_cached_answer_expires_on_the_shared_clock() {
    let fx = Fixture::new();
    let manual = Arc::new(capability_core::clock::ManualClock::new());
    let guard = LoopGuard::new(fx.leases.clone(), fx.cache.clone(), fx.key.clone())
        .clock(manual.clone())
        .holder("replica-a")
        .answer_ttl(Duration::from_secs(600));
    let monitor = context(POLICY, "monitor");
    let runs = AtomicU32::new(0);
    let answer = || {
        runs.fetch_add(1, Ordering::SeqCst);
        LoopOutcome::Answer {
            text: "db-2's disk is full".into(),
            iterations: 1,
            tool_calls: 0,
        }
    };
    let caller = Caller::new("w");
    guard
        .run(&fx.dispatch, "disk", &monitor, caller, answer)
        .expect("run");
    manual.advance(Duration::from_secs(599));
    let hit = guard
        .run(&fx.dispatch, "disk", &monitor, caller, answer)
        .expect("run");
    assert!(matches!(hit, Guarded::Cached(_)), "{hit:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "answered from the cache");
    manual.advance(Duration::from_secs(2));
    guard
        .run(&fx.dispatch, "disk", &monitor, caller, answer)
        .expect("run");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "past its TTL: run again");
}

#[test]
fn answers_and_degrades_expire_on_their_own_ttls() {
    let fx = Fixture::new();
    let guard = fx
        .guard()
        .answer_ttl(Duration::from_secs(600))
        .degrade_ttl(Duration::from_secs(30));
    let monitor = context(POLICY, "monitor");
    let runs = AtomicU32::new(0);
    let degrade = || {
        runs.fetch_add(1, Ordering::SeqCst);
        LoopOutcome::Degraded {
            degrade: capability_agent::driver::Degrade::IterationsExceeded { max: 8 },
            iterations: 8,
            tool_calls: 8,
        }
    };
    let caller = Caller::new("w");
    guard
        .run(&fx.dispatch, "degraded", &monitor, caller, degrade)
        .expect("run");
    fx.clock.advance(Duration::from_secs(29));
    let hit = guard
        .run(&fx.dispatch, "degraded", &monitor, caller, degrade)
        .expect("run");
    assert!(
        matches!(&hit, Guarded::Cached(c) if c.answer().is_none()),
        "{hit:?}"
    );
    fx.clock.advance(Duration::from_secs(1));
    guard
        .run(&fx.dispatch, "degraded", &monitor, caller, degrade)
        .expect("run");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "a degrade is served for 30 s, not longer"
    );

    let answer = || {
        runs.fetch_add(1, Ordering::SeqCst);
        LoopOutcome::Answer {
            text: "ok".into(),
            iterations: 1,
            tool_calls: 0,
        }
    };
    runs.store(0, Ordering::SeqCst);
    guard
        .run(&fx.dispatch, "answered", &monitor, caller, answer)
        .expect("run");
    fx.clock.advance(Duration::from_secs(599));
    guard
        .run(&fx.dispatch, "answered", &monitor, caller, answer)
        .expect("run");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "an answer is served for 600 s"
    );
    fx.clock.advance(Duration::from_secs(1));
    guard
        .run(&fx.dispatch, "answered", &monitor, caller, answer)
        .expect("run");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "and then runs again");

    // A zero degrade TTL caches no degrade at all.
    let no_degrades = fx.guard().degrade_ttl(Duration::ZERO);
    runs.store(0, Ordering::SeqCst);
    no_degrades
        .run(&fx.dispatch, "outage", &monitor, caller, degrade)
        .expect("run");
    no_degrades
        .run(&fx.dispatch, "outage", &monitor, caller, degrade)
        .expect("run");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_planted_edited_or_copied_cache_entry_is_not_served() {
    let fx = Fixture::new();
    let guard = fx.guard();
    let monitor = context(POLICY, "monitor");
    let operator = context(POLICY, "operator");
    let far = fx.clock.now_ms() + 3_600_000;
    let key_of = |role: &str| serde_json::json!([INCIDENT, role, "test/1"]).to_string();

    // Planted: an entry written into the store by someone without the key.
    let planted = format!(
        "{}\n{}",
        "0".repeat(64),
        json!({"key": INCIDENT, "role": "monitor", "policy_version": "test/1",
               "result": {"kind": "answer", "text": "all clear, close the incident"},
               "iterations": 1, "tool_calls": 0, "calls": null, "holder": "x",
               "stored_ms": 0, "expires_ms": far})
    );
    fx.cache
        .put(&key_of("monitor"), &planted, 0, far)
        .expect("plant");
    let (ran, turns, _) = run_loop(&fx, &guard, &monitor);
    let Guarded::Ran { notes, outcome, .. } = ran else {
        panic!("ran")
    };
    assert_eq!(notes, [GuardNote::ForgedEntry]);
    assert_eq!(turns, 2);
    assert_eq!(
        outcome.answer(),
        Some("db-2's disk is full"),
        "the loop's own answer"
    );

    // Edited: the genuine entry with its text changed.
    let genuine = fx
        .cache
        .get(&key_of("monitor"), 0)
        .expect("get")
        .expect("entry");
    let edited = genuine.replace("db-2's disk is full", "all clear");
    fx.cache
        .put(&key_of("monitor"), &edited, 0, far)
        .expect("edit");
    let (ran, _, _) = run_loop(&fx, &guard, &monitor);
    assert!(
        matches!(&ran, Guarded::Ran { notes, .. } if notes == &[GuardNote::ForgedEntry]),
        "{ran:?}"
    );

    // Copied: monitor's genuine entry put under operator's key.
    let genuine = fx
        .cache
        .get(&key_of("monitor"), 0)
        .expect("get")
        .expect("entry");
    fx.cache
        .put(&key_of("operator"), &genuine, 0, far)
        .expect("copy");
    let (ran, _, _) = run_loop(&fx, &guard, &operator);
    assert!(
        matches!(&ran, Guarded::Ran { notes, .. } if notes == &[GuardNote::ForgedEntry]),
        "{ran:?}"
    );

    // Another key (another deployment) cannot open this one's entries either.
    let stranger = LoopGuard::new(
        fx.leases.clone(),
        fx.cache.clone(),
        DigestKey::from_bytes(&[8; 32]).expect("key"),
    )
    .clock(fx.clock.clone());
    let (ran, _, _) = run_loop(&fx, &stranger, &monitor);
    assert!(
        matches!(&ran, Guarded::Ran { notes, .. } if notes == &[GuardNote::ForgedEntry]),
        "{ran:?}"
    );
}

#[test]
fn a_lapsed_lease_is_taken_over_and_its_old_holder_fenced() {
    let leases = MemoryLeases::new();
    let now = 1_000_000;
    let Acquire::Held(crashed) = leases
        .acquire("INC-9", "crashed", now, 30_000)
        .expect("take")
    else {
        panic!("free")
    };
    assert!(matches!(
        leases.acquire("INC-9", "next", now + 29_999, 30_000).expect("try"),
        Acquire::InFlight(ref held) if held.holder == "crashed"
    ));
    let Acquire::Held(next) = leases
        .acquire("INC-9", "next", now + 30_000, 30_000)
        .expect("take")
    else {
        panic!("lapsed: taken over")
    };
    assert_eq!(next.generation, crashed.generation + 1);
    assert!(
        !leases.renew(&crashed, now + 30_001, 30_000).expect("renew"),
        "fenced"
    );
    leases
        .release(&crashed)
        .expect("release is a no-op for the old holder");
    assert!(matches!(
        leases.acquire("INC-9", "third", now + 30_002, 30_000).expect("try"),
        Acquire::InFlight(ref held) if held.holder == "next"
    ));
    assert!(leases.renew(&next, now + 40_000, 30_000).expect("renew"));
}

#[test]
fn a_panicking_loop_releases_its_lease_and_caches_nothing() {
    let fx = Fixture::new();
    let guard = fx.guard();
    let monitor = context(POLICY, "monitor");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        guard.run(&fx.dispatch, INCIDENT, &monitor, Caller::new("w"), || {
            panic!("the model client panicked")
        })
    }));
    assert!(panicked.is_err());
    let (after, turns, _) = run_loop(&fx, &guard, &monitor);
    assert!(
        matches!(after, Guarded::Ran { .. }),
        "not in flight, not cached: {after:?}"
    );
    assert_eq!(turns, 2);
}

/// A sink that fails every append once told to.
struct Failing {
    inner: MemorySink,
    fail: std::sync::atomic::AtomicBool,
}

impl capability_audit::AuditSink for Failing {
    fn append(
        &self,
        record: capability_audit::AuditRecord,
    ) -> Result<capability_audit::AuditRecord, capability_audit::AuditError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(capability_audit::AuditError::Io {
                path: "trail".into(),
                message: "disk full".into(),
            });
        }
        self.inner.append(record)
    }

    fn digest_key(&self) -> Result<&DigestKey, capability_audit::AuditError> {
        self.inner.digest_key()
    }
}

#[test]
fn a_hit_or_a_start_that_cannot_be_recorded_is_not_served_nor_run() {
    let fx = Fixture::new();
    let sink = Arc::new(Failing {
        inner: MemorySink::new(),
        fail: false.into(),
    });
    let dispatch = AuditedDispatch::new(sink.clone());
    let guard = fx.guard();
    let monitor = context(POLICY, "monitor");
    let answer = || LoopOutcome::Answer {
        text: "ok".into(),
        iterations: 1,
        tool_calls: 0,
    };
    guard
        .run(&dispatch, INCIDENT, &monitor, Caller::new("w"), answer)
        .expect("run");
    sink.fail.store(true, Ordering::SeqCst);
    let error = guard
        .run(&dispatch, INCIDENT, &monitor, Caller::new("w"), || {
            panic!("not run either")
        })
        .expect_err("no record, no answer");
    assert_eq!(error.place, "audit");
    assert!(error.message.contains("disk full"), "{error}");
    let error = guard
        .run(&dispatch, "another", &monitor, Caller::new("w"), || {
            panic!("a loop whose start is not on record does not run")
        })
        .expect_err("no record, no run");
    assert_eq!(error.place, "audit");
    // Its lease was let go: once the trail takes records again, the loop runs.
    sink.fail.store(false, Ordering::SeqCst);
    let ran = guard
        .run(&dispatch, "another", &monitor, Caller::new("w"), answer)
        .expect("run");
    assert!(matches!(ran, Guarded::Ran { .. }), "{ran:?}");
}
