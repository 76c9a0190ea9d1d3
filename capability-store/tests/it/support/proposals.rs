//! The same checks of kept proposals on every store.

use capability_store::{KeptProposal, Store};

fn proposal(id: &str, created_at: u64, expires_at: u64, body: &str) -> KeptProposal {
    KeptProposal {
        id: id.to_owned(),
        audience: "gw".to_owned(),
        server: "git".to_owned(),
        tool: "git_reset".to_owned(),
        proposer: "role:operator".to_owned(),
        created_at,
        expires_at,
        body: body.to_owned(),
    }
}

/// A proposal is kept once while it waits (proposing the same call again keeps the first),
/// replaced once it stopped waiting, listed only while it waits, and dropped when used.
pub fn kept_proposals_wait_once_and_go_when_used(store: &dyn Store) {
    store
        .keep_proposal(&proposal("p1", 100, 200, "first"))
        .expect("keep");
    store
        .keep_proposal(&proposal("p1", 150, 250, "again"))
        .expect("keep again");
    store
        .keep_proposal(&proposal("p2", 120, 130, "short"))
        .expect("keep");
    let waiting = store.proposals(125).expect("list");
    let bodies: Vec<&str> = waiting.iter().map(|p| p.body.as_str()).collect();
    assert_eq!(
        bodies,
        ["first", "short"],
        "oldest first; the first p1 kept"
    );
    assert_eq!(
        store.proposals(140).expect("list").len(),
        1,
        "p2 stopped waiting"
    );
    store
        .keep_proposal(&proposal("p1", 300, 400, "fresh"))
        .expect("replace");
    let waiting = store.proposals(300).expect("list");
    assert_eq!(
        waiting[0].body, "fresh",
        "replaced once it had stopped waiting"
    );
    assert_eq!(waiting[0].expires_at, 400);
    assert!(store.drop_proposal("p1").expect("drop"));
    assert!(!store.drop_proposal("p1").expect("drop again"));
    assert!(store.proposals(300).expect("list").is_empty());
}
