//! The HTTP front under a hostile network, attacked from outside the process with raw sockets:
//! idle and slow connections cannot starve `capability gateway --listen` (a request head within
//! `[http] header_timeout_secs`, a body within `body_timeout_secs`, connections capped below
//! the descriptor limit with strangers' closed first), a failing `accept` is backed off and
//! said once per interval, and the metrics endpoint shares the same loop.

#![cfg(unix)]

use crate::proxy_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxy_common::{BIN, scratch};

const TOKEN: &str = "the-legitimate-callers-token";

/// A stdio MCP server in plain Python with one read-only tool.
const SERVER: &str = r#"
import json, sys
def send(value):
    sys.stdout.write(json.dumps(value) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "echo",
            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "hi"}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

/// A policy over the Python server, the caller's token, and these `[http]` lines.
fn setup(name: &str, http: &str) -> std::path::PathBuf {
    let dir = scratch(name, "");
    std::fs::write(dir.join("server.py"), SERVER).expect("server");
    let hash = capability_rules::sha256_hex(TOKEN.as_bytes());
    let policy = format!(
        r#"[roles.viewer]
ceiling = "read-only"
allow = ["*"]

[servers.s]
command = ["python3", {script:?}]
trust = "trusted"

[bearer_tokens]
"sha256:{hash}" = "viewer"

[http]
{http}
"#,
        script = dir.join("server.py").display().to_string(),
    );
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    dir
}

/// The gateway on a free port, under a descriptor limit of `nofile` when given: its URL's
/// port, the child, and everything it said on standard error (lines, and bytes in all).
struct Gateway {
    child: Child,
    port: u16,
    said: Arc<Mutex<Vec<String>>>,
    said_bytes: Arc<AtomicUsize>,
}

impl Gateway {
    fn start(dir: &Path, nofile: Option<u32>, extra: &[&str]) -> Gateway {
        let mut command = match nofile {
            Some(n) => {
                let mut shell = Command::new("sh");
                shell
                    .arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(BIN);
                shell
            }
            None => Command::new(BIN),
        };
        command
            .args(["gateway", "--policy"])
            .arg(dir.join("policy.toml"))
            .args(["--listen", "127.0.0.1:0", "--audit"])
            .arg(dir.join("trail.jsonl"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the gateway");
        let stderr = child.stderr.take().expect("piped");
        let said = Arc::new(Mutex::new(Vec::new()));
        let said_bytes = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let said = said.clone();
            let said_bytes = said_bytes.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stderr);
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 {
                    said_bytes.fetch_add(line.len(), Ordering::SeqCst);
                    if let Some((_, url)) = line.split_once("listening on http://127.0.0.1:") {
                        let port: u16 = url.trim().trim_end_matches("/mcp").parse().unwrap_or(0);
                        let _ = tx.send(port);
                    }
                    if let Ok(mut said) = said.lock()
                        && said.len() < 1000
                    {
                        said.push(line.trim_end().to_owned());
                    }
                    line.clear();
                }
            });
        }
        let port = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the gateway listens within 30 s");
        Gateway {
            child,
            port,
            said,
            said_bytes,
        }
    }

    fn lines_saying(&self, text: &str) -> usize {
        proxy_common::lines_saying(&self.said, text)
    }

    /// The descriptors the gateway holds open.
    fn open_descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A legitimate caller's `initialize`, on a fresh connection: the status, within `wait`.
fn initialize(port: u16, wait: Duration) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(wait)).ok()?;
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Whether the peer closed `stream` (a read gives its end, or a reset) within `wait`.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    let mut byte = [0u8; 1];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let _ = stream.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match stream.read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
    false
}

/// 300 connections that never send a byte, against a gateway allowed 256 descriptors and a
/// head timeout too long to save it: the cap (below the limit) closes the oldest strangers, a
/// legitimate caller is answered at once, and the gateway never runs out of descriptors.
#[test]
fn a_flood_of_idle_connections_leaves_a_legitimate_caller_served() {
    let dir = setup("edge-flood", "header_timeout_secs = 120");
    let gateway = Gateway::start(&dir, Some(256), &[]);
    let mut idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", gateway.port)).ok())
        .collect();
    assert!(idle.len() >= 290, "{} connections opened", idle.len());
    // The gateway has taken in the flood up to its cap once it closes the oldest stranger.
    assert!(
        capability_testkit::wait_for(|| closed_within(&mut idle[0], Duration::from_millis(1))),
        "the oldest stranger was never closed"
    );
    let asked = Instant::now();
    let status = initialize(gateway.port, Duration::from_secs(10));
    assert_eq!(status, Some(200), "the legitimate caller is answered");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "answered in {:?}",
        asked.elapsed()
    );
    let open = gateway.open_descriptors();
    assert!(open < 256, "the gateway holds {open} descriptors");
    // The strangers closed to make room were the oldest.
    let mut closed = 0;
    for stream in idle.iter_mut().take(120) {
        if closed_within(stream, Duration::from_millis(50)) {
            closed += 1;
        }
    }
    assert!(
        closed >= 100,
        "{closed} of the oldest 120 strangers were closed"
    );
    // And the caller is served again while the flood goes on.
    assert_eq!(initialize(gateway.port, Duration::from_secs(10)), Some(200));
}

/// A connection that sends no head, or a head a byte at a time, is closed once
/// `header_timeout_secs` has passed; a body that does not come in `body_timeout_secs` is
/// answered 408. The metrics endpoint closes an idle connection too (its default, 5 s).
#[test]
fn slow_and_silent_connections_are_closed_within_their_timeouts() {
    let dir = setup(
        "edge-slow",
        "header_timeout_secs = 2\nbody_timeout_secs = 2",
    );
    let metrics_port = capability_testkit::free_port();
    let gateway = Gateway::start(
        &dir,
        None,
        &["--metrics", &format!("127.0.0.1:{metrics_port}")],
    );
    let started = Instant::now();
    let mut silent: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", gateway.port)).expect("connect"))
        .collect();
    let mut metrics_idle = TcpStream::connect(("127.0.0.1", metrics_port)).expect("connect");
    // A head, a byte every 100 ms (7 s for the whole head).
    let mut slow = TcpStream::connect(("127.0.0.1", gateway.port)).expect("connect");
    let head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let dribble = std::thread::spawn(move || {
        for byte in head {
            if slow.write_all(&[*byte]).is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    });
    // A whole head, a body that never comes.
    let mut stalled = TcpStream::connect(("127.0.0.1", gateway.port)).expect("connect");
    write!(
        stalled,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    )
    .expect("head");
    for stream in &mut silent {
        assert!(
            closed_within(stream, Duration::from_secs(5)),
            "a silent connection is closed"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        dribble.join().expect("the dribbler"),
        "a head sent a byte at a time is cut off"
    );
    let mut answer = String::new();
    stalled
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = stalled.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout_secs"), "{answer}");
    assert!(
        closed_within(&mut metrics_idle, Duration::from_secs(8)),
        "the metrics endpoint closes an idle connection"
    );
    // The front still serves.
    assert_eq!(initialize(gateway.port, Duration::from_secs(10)), Some(200));
}

/// Out of descriptors, `accept` fails: the loop backs off instead of spinning, gives a
/// descriptor back by closing a stranger's connection, and says so at most once per 10 s
/// (before: each failure said at once, 37 MB of standard error in 10 s).
#[test]
fn a_failing_accept_backs_off_and_is_said_once_per_interval() {
    let dir = setup("edge-accept-fails", "header_timeout_secs = 120");
    let gateway = Gateway::start(&dir, Some(48), &[]);
    let baseline = gateway.said_bytes.load(Ordering::SeqCst);
    // More connections than the process has descriptors for, held for 4 s.
    let until = Instant::now() + Duration::from_secs(4);
    let mut held = Vec::new();
    while Instant::now() < until {
        if let Ok(stream) = TcpStream::connect(("127.0.0.1", gateway.port)) {
            held.push(stream);
        }
        if held.len() > 400 {
            held.drain(..100);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let said = gateway.said_bytes.load(Ordering::SeqCst) - baseline;
    let failures = gateway.lines_saying("cannot accept a connection");
    assert!(
        failures >= 1,
        "the failing accept is said: {:?}",
        gateway.said.lock().map(|s| s.clone()).unwrap_or_default()
    );
    assert!(failures <= 1, "said {failures} times in 4 s");
    assert!(said < 4096, "{said} bytes of standard error in 4 s");
    drop(held);
    // Once the flood is gone, callers are served.
    let deadline = Instant::now() + Duration::from_secs(10);
    while initialize(gateway.port, Duration::from_secs(2)) != Some(200) {
        assert!(Instant::now() < deadline, "the gateway serves again");
        std::thread::sleep(Duration::from_millis(100));
    }
}
