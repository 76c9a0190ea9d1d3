//! The per-provider circuit breaker, on a fake clock: alone, and guarding loops.

use crate::loop_support;

use std::sync::Arc;
use std::time::Duration;

use capability_agent::breaker::{Breaker, BreakerState, Clock, FakeClock};
use capability_agent::driver::{AgentLoop, Degrade, ToolSource};
use capability_audit::Caller;
use capability_core::authz::{Ceiling, ToolContext};
use capability_mcp::Server;
use serde_json::{Value, json};

use loop_support::*;

const COOL: Duration = Duration::from_secs(30);

fn breaker(threshold: u32) -> (Arc<FakeClock>, Arc<Breaker>) {
    let clock = Arc::new(FakeClock::new());
    let breaker = Breaker::new(threshold, COOL).with_clock(clock.clone());
    (clock, Arc::new(breaker))
}

#[test]
fn consecutive_failures_open_it_for_the_cool_down_then_one_probe_goes_through() {
    let (clock, breaker) = breaker(3);
    breaker.failure("ollama");
    breaker.failure("ollama");
    assert_eq!(breaker.admit("ollama"), Ok(()), "below the threshold");
    breaker.failure("ollama");
    let until = breaker.admit("ollama").expect_err("open");
    assert_eq!(until, clock.now() + COOL);

    clock.advance(COOL - Duration::from_millis(1));
    assert!(breaker.admit("ollama").is_err(), "still cooling down");
    clock.advance(Duration::from_millis(1));
    assert_eq!(breaker.admit("ollama"), Ok(()), "the probe");
    assert!(
        matches!(breaker.state("ollama"), BreakerState::HalfOpen { .. }),
        "{:?}",
        breaker.state("ollama")
    );
    assert!(breaker.admit("ollama").is_err(), "one probe at a time");
    breaker.success("ollama");
    assert_eq!(
        breaker.state("ollama"),
        BreakerState::Closed { failures: 0 }
    );
    assert_eq!(breaker.admit("ollama"), Ok(()));
}

#[test]
fn a_failed_probe_opens_it_again_and_a_lost_probe_is_replaced() {
    let (clock, breaker) = breaker(1);
    breaker.failure("openai");
    clock.advance(COOL);
    assert_eq!(breaker.admit("openai"), Ok(()));
    breaker.failure("openai");
    assert_eq!(breaker.admit("openai"), Err(clock.now() + COOL), "reopened");

    // A probe that never reports is given up after another cool-down.
    clock.advance(COOL);
    assert_eq!(breaker.admit("openai"), Ok(()));
    clock.advance(COOL);
    assert_eq!(breaker.admit("openai"), Ok(()), "another probe");
}

#[test]
fn a_success_resets_the_count_and_providers_are_apart() {
    let (_, breaker) = breaker(2);
    breaker.failure("anthropic");
    breaker.success("anthropic");
    breaker.failure("anthropic");
    assert_eq!(breaker.admit("anthropic"), Ok(()), "not consecutive");
    breaker.failure("ollama");
    breaker.failure("ollama");
    assert!(breaker.admit("ollama").is_err());
    assert_eq!(breaker.admit("anthropic"), Ok(()));
    // A threshold of 0 means 1.
    let zero = Breaker::new(0, COOL);
    assert_eq!(zero.admit("x"), Ok(()));
    zero.failure("x");
    assert!(zero.admit("x").is_err());
}

#[test]
fn it_is_shared_between_threads() {
    let (_, breaker) = breaker(8);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let breaker = breaker.clone();
            std::thread::spawn(move || {
                for _ in 0..2 {
                    breaker.failure("ollama");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no panic");
    }
    assert!(
        breaker.admit("ollama").is_err(),
        "8 failures from 4 threads"
    );
}

/// One loop run over the k8s tools with `model`, guarded by `breaker`.
fn run(breaker: &Arc<Breaker>, model: &mut Scripted) -> (Option<Degrade>, usize) {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let reader = ToolContext::new("reader", "s-1", Ceiling::ReadOnly);
    let executor = |_: &str, _: &Value| -> Result<Value, String> { Ok(json!("ok")) };
    let outcome = AgentLoop::new(&dispatch).breaker(breaker.clone()).run(
        model,
        &mut Vec::new(),
        &ToolSource::new(&server, &tools),
        &reader,
        Caller::new("watcher"),
        &executor,
    );
    (outcome.degrade().cloned(), per_call(&sink).len())
}

#[test]
fn a_provider_failing_n_times_makes_the_next_loop_degrade_without_calling_it() {
    let (clock, breaker) = breaker(3);
    for _ in 0..3 {
        let mut failing = Scripted::failing("ollama");
        let (degrade, _) = run(&breaker, &mut failing);
        assert!(matches!(degrade, Some(Degrade::ProviderFailing { .. })));
        assert_eq!(failing.turns(), 1, "no retry");
    }

    let mut healthy = Scripted::new([call("c", "list_pods", json!({})), answer("ok")]);
    healthy.provider = "ollama".into();
    let (degrade, records) = run(&breaker, &mut healthy);
    assert_eq!(
        degrade,
        Some(Degrade::BreakerOpen {
            provider: "ollama".into(),
            until: clock.now() + COOL
        })
    );
    assert_eq!(healthy.turns(), 0, "the model was not called");
    assert_eq!(records, 0);

    // Another provider is not held back.
    let mut other = Scripted::new([answer("fine")]);
    other.provider = "anthropic".into();
    assert_eq!(run(&breaker, &mut other).0, None);

    // After the cool-down, the next loop is the probe; it succeeds and closes the breaker.
    clock.advance(COOL);
    let (degrade, records) = run(&breaker, &mut healthy);
    assert_eq!(degrade, None);
    assert_eq!((healthy.turns(), records), (2, 1));
    assert_eq!(
        breaker.state("ollama"),
        BreakerState::Closed { failures: 0 }
    );
}

#[test]
fn a_failing_half_open_probe_reopens_it_for_the_next_loop() {
    let (clock, breaker) = breaker(1);
    assert!(matches!(
        run(&breaker, &mut Scripted::failing("ollama")).0,
        Some(Degrade::ProviderFailing { .. })
    ));
    clock.advance(COOL);
    let mut probe = Scripted::failing("ollama");
    assert!(matches!(
        run(&breaker, &mut probe).0,
        Some(Degrade::ProviderFailing { .. })
    ));
    assert_eq!(probe.turns(), 1);
    let mut next = Scripted::failing("ollama");
    assert!(matches!(
        run(&breaker, &mut next).0,
        Some(Degrade::BreakerOpen { .. })
    ));
    assert_eq!(next.turns(), 0);
}
