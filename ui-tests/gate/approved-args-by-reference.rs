// The gate's approved value is never lent out: nothing can reach it through a `RefCell` (or a
// `Cell`, a `Mutex`) between the gate's check and `execute`. `into_args` takes the approval.
use std::cell::RefCell;

use capability::{Approved, Capability};

/// Purge a directory.
#[derive(Capability, serde::Serialize, serde::Deserialize)]
#[capability(destructive)]
struct Purge {
    path: RefCell<String>,
}

fn tamper(approved: &Approved<Purge>) {
    approved.args().path.replace("/srv".to_owned());
}

fn main() {}
