//! Sessions bound to the principal they were issued to: a session id counts only when the
//! transport issued it, to the same principal, and it has not sat idle past its limit; the
//! number alive is capped, per principal and in total, counting those being created.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use capability_core::clock::SharedClock;
use capability_mcp::telemetry::{Session, Side, Transport};

/// What a request's `Mcp-Session-Id` is to this edge.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Known {
    /// Issued to this principal, and alive.
    Yours,
    /// Issued to another principal.
    Theirs,
    /// Never issued, closed, or expired (its id is given back to close it downstream).
    Unknown(Option<String>),
}

#[derive(Debug)]
struct Entry {
    principal: String,
    last_used: Instant,
    /// Its duration, recorded when the entry goes (closed or expired):
    /// `mcp.server.session.duration`.
    _duration: Session,
}

#[derive(Debug, Default)]
struct Table {
    alive: HashMap<String, Entry>,
    /// Sessions being created (an `initialize` admitted, its answer not back yet), per
    /// principal.
    pending: HashMap<String, usize>,
}

/// The sessions of one edge.
#[derive(Debug)]
pub(crate) struct Sessions {
    table: Arc<Mutex<Table>>,
    max_total: usize,
    max_per_principal: usize,
    idle: Duration,
    /// Where idle time is read.
    clock: SharedClock,
}

/// A place among the sessions, held while a session is created; given back when dropped
/// unless the session was issued.
#[derive(Debug)]
pub(crate) struct Reservation {
    table: Arc<Mutex<Table>>,
    principal: String,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut table = lock(&self.table);
        if let Some(n) = table.pending.get_mut(&self.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                table.pending.remove(&self.principal);
            }
        }
    }
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sessions {
    pub(crate) fn new(
        max_total: usize,
        max_per_principal: usize,
        idle: Duration,
        clock: SharedClock,
    ) -> Self {
        Sessions {
            table: Arc::default(),
            max_total,
            max_per_principal,
            idle,
            clock,
        }
    }

    /// The same sessions under new caps and idle time (sessions over a lowered cap stay until
    /// they end; new ones wait for room).
    pub(crate) fn with_limits(
        &self,
        max_total: usize,
        max_per_principal: usize,
        idle: Duration,
    ) -> Self {
        Sessions {
            table: Arc::clone(&self.table),
            max_total,
            max_per_principal,
            idle,
            clock: Arc::clone(&self.clock),
        }
    }

    /// How long `entry` has sat idle.
    fn idle_for(&self, entry: &Entry) -> Duration {
        self.clock
            .instant()
            .saturating_duration_since(entry.last_used)
    }

    /// What `id` is for `principal`; a session of this principal is touched (its idle time
    /// starts again).
    pub(crate) fn check(&self, id: &str, principal: &str) -> Known {
        let mut table = lock(&self.table);
        let now = self.clock.instant();
        let Some(entry) = table.alive.get_mut(id) else {
            return Known::Unknown(None);
        };
        if now.saturating_duration_since(entry.last_used) > self.idle {
            table.alive.remove(id);
            return Known::Unknown(Some(id.to_owned()));
        }
        if entry.principal != principal {
            return Known::Theirs;
        }
        entry.last_used = now;
        Known::Yours
    }

    /// A place for a new session of `principal`, or why there is none. Sessions idle past
    /// their limit are forgotten first, and their ids given back to close them downstream.
    pub(crate) fn admit(&self, principal: &str) -> (Result<Reservation, String>, Vec<String>) {
        let mut table = lock(&self.table);
        let expired = self.forget_idle(&mut table);
        let pending_total: usize = table.pending.values().sum();
        let mine = table
            .alive
            .values()
            .filter(|e| e.principal == principal)
            .count()
            + table.pending.get(principal).copied().unwrap_or(0);
        let refused = if mine >= self.max_per_principal {
            Some(format!(
                "this caller has {mine} sessions open, the most one may ([http] \
                 max_sessions_per_principal = {})",
                self.max_per_principal
            ))
        } else if table.alive.len() + pending_total >= self.max_total {
            Some(format!(
                "{} sessions are open, the most this server keeps ([http] max_sessions = {})",
                table.alive.len() + pending_total,
                self.max_total
            ))
        } else {
            None
        };
        let result = match refused {
            Some(why) => Err(why),
            None => {
                *table.pending.entry(principal.to_owned()).or_default() += 1;
                Ok(Reservation {
                    table: Arc::clone(&self.table),
                    principal: principal.to_owned(),
                })
            }
        };
        (result, expired)
    }

    /// Forgets the sessions idle past their limit: their ids, to close them downstream.
    pub(crate) fn expire_idle(&self) -> Vec<String> {
        self.forget_idle(&mut lock(&self.table))
    }

    fn forget_idle(&self, table: &mut Table) -> Vec<String> {
        let expired: Vec<String> = table
            .alive
            .iter()
            .filter(|(_, e)| self.idle_for(e) > self.idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            table.alive.remove(id);
        }
        expired
    }

    /// The transport issued `id` for the reserved place.
    pub(crate) fn issued(&self, reservation: Reservation, id: &str) {
        let mut table = lock(&self.table);
        table.alive.insert(
            id.to_owned(),
            Entry {
                principal: reservation.principal.clone(),
                last_used: self.clock.instant(),
                _duration: Session::start(Side::Server, Transport::Tcp),
            },
        );
        // The reservation is given back when it drops, after the lock is released.
        drop(table);
        drop(reservation);
    }

    /// The session `id` was closed (`DELETE`).
    pub(crate) fn closed(&self, id: &str) {
        lock(&self.table).alive.remove(id);
    }

    /// How many sessions are alive.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.table).alive.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_core::clock::{ManualClock, SystemClock};

    #[test]
    fn a_session_is_its_principals_only_and_caps_hold() {
        let sessions = Sessions::new(3, 2, Duration::from_secs(60), SystemClock::shared());
        let (first, _) = sessions.admit("alice");
        sessions.issued(first.expect("room"), "s-1");
        assert_eq!(sessions.check("s-1", "alice"), Known::Yours);
        assert_eq!(sessions.check("s-1", "mallory"), Known::Theirs);
        assert_eq!(sessions.check("made-up", "alice"), Known::Unknown(None));
        let (second, _) = sessions.admit("alice");
        let second = second.expect("room");
        let (third, _) = sessions.admit("alice");
        assert!(
            third
                .expect_err("alice is at her cap")
                .contains("max_sessions_per_principal")
        );
        drop(second);
        let (again, _) = sessions.admit("alice");
        sessions.issued(again.expect("the dropped place is free again"), "s-2");
        let (bob, _) = sessions.admit("bob");
        let _bob = bob.expect("room");
        let (carol, _) = sessions.admit("carol");
        assert!(carol.expect_err("full").contains("max_sessions = 3"));
        sessions.closed("s-1");
        assert_eq!(sessions.len(), 1);
    }

    #[test]
    fn an_idle_session_expires() {
        let clock = Arc::new(ManualClock::new());
        let sessions = Sessions::new(10, 10, Duration::from_secs(60), clock.clone());
        let (place, _) = sessions.admit("alice");
        sessions.issued(place.expect("room"), "s-1");
        clock.advance(Duration::from_secs(59));
        assert_eq!(sessions.check("s-1", "alice"), Known::Yours, "not yet idle");
        clock.advance(Duration::from_secs(59));
        assert_eq!(
            sessions.check("s-1", "alice"),
            Known::Yours,
            "a use starts its idle time again"
        );
        clock.advance(Duration::from_secs(61));
        assert_eq!(
            sessions.check("s-1", "alice"),
            Known::Unknown(Some("s-1".to_owned()))
        );
        let (place, _) = sessions.admit("alice");
        sessions.issued(place.expect("room"), "s-2");
        clock.advance(Duration::from_secs(61));
        let (_, expired) = sessions.admit("alice");
        assert_eq!(expired, ["s-2"]);
        let (place, _) = sessions.admit("alice");
        sessions.issued(place.expect("room"), "s-3");
        assert_eq!(sessions.expire_idle(), Vec::<String>::new());
        clock.advance(Duration::from_secs(60));
        assert_eq!(sessions.expire_idle(), Vec::<String>::new(), "at the limit");
        clock.advance(Duration::from_millis(1));
        assert_eq!(sessions.expire_idle(), ["s-3"]);
        assert_eq!(sessions.len(), 0);
    }
}
