//! A port for a server that must be told its port before it starts.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};

/// The first port of the ephemeral range, where the system takes the local port of every
/// connection and the port of every listener bound to port 0 (Linux:
/// `/proc/sys/net/ipv4/ip_local_port_range`; 32768 elsewhere or when unreadable).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// The lowest port handed out: above the ports services commonly use.
const LOWEST: u16 = 20000;

/// A TCP port of 127.0.0.1 nothing listens on, for a server that is told its port (a process
/// that cannot be asked for port 0 and say the one it got). It is below the ephemeral range,
/// where no connection's local port is ever taken from, picked at random and checked free by
/// binding it; a port the system chose (binding port 0) and a server bound later could be
/// taken in between by any test's connection. Falls back to the system's choice when the
/// range below the ephemeral one is too small or taken.
pub fn free_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let end = ephemeral_start();
    if end > LOWEST + 1000 {
        let span = u64::from(end - LOWEST);
        let seed = u64::from(std::process::id())
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
        let mut rng = crate::Rng::seeded(seed ^ NEXT.fetch_add(1, Ordering::Relaxed));
        for _ in 0..200 {
            let port = LOWEST + (rng.next() % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_below_the_ephemeral_range_and_can_be_bound() {
        let end = ephemeral_start();
        for _ in 0..20 {
            let port = free_port();
            if end > LOWEST + 1000 {
                assert!((LOWEST..end).contains(&port), "{port} of {LOWEST}..{end}");
            }
            TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
        }
    }
}
