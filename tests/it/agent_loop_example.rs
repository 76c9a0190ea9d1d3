//! `examples/agent_loop.rs`, run as a process: what it prints is what docs/agent-loop.md says the
//! ghost-loop guards do (a second replica refused while the first runs, a repeat answered from
//! the cache with no model turn, both on record).

use crate::common;

use std::process::Command;

#[test]
fn the_example_shows_a_second_replica_refused_and_a_repeat_answered_from_the_cache() {
    let binary = common::example_binary("agent_loop");
    let output = Command::new(&binary).output().expect("runs the example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let guards = stdout
        .split_once("5. the ghost-loop guards")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no section 5: {stdout}"));
    // B is refused before A's first model turn, and A's loop makes its two turns.
    let refused = guards
        .find("replica-b: the incident's loop runs on replica-a")
        .unwrap_or_else(|| panic!("{guards}"));
    let first_turn = guards.find("model turn").expect("A's turns");
    assert!(refused < first_turn, "{guards}");
    let (section, trail) = guards
        .split_once("the audit trail")
        .expect("the trail follows");
    assert_eq!(section.matches("model turn, shown").count(), 2, "{section}");
    assert!(
        section.contains("the repeat: answered from the cache (2 model turns in all, none for it)"),
        "{section}"
    );
    assert!(
        trail.contains("agent_loop    Allowed the agent loop started"),
        "{trail}"
    );
    assert!(
        trail.contains("agent_loop    Allowed answered from the cache"),
        "{trail}"
    );
}
