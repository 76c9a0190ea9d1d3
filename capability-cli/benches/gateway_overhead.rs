//! The latency `capability gateway` adds, against the server straight and against a plain byte
//! relay, in one run with rounds interleaved: the official TypeScript SDK client calls `echo` of
//! `server-everything` (and lists its tools) over stdio, (1) spawning the server itself, (2)
//! spawning a relay that spawns the server and copies bytes both ways (this benchmark's own
//! executable, run with `--relay`: two threads, `std::io::copy`), (3) spawning `capability
//! gateway` over a fleet of that one server (role `operator`, every call routed, decided and
//! audited into a JSON Lines file). Prints the medians over the rounds of each path's p50 and
//! p99, and the ratios.
//!
//! `cargo bench -p capability-cli --bench gateway_overhead`
//!
//! Needs Node.js 20+ and npm (the pinned packages are installed by the tests' support module).

#[path = "../tests/support/mod.rs"]
#[allow(unused_macros, unused_imports)]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};

const CALLS: usize = 1_000;
const ROUNDS: usize = 3;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--relay") {
        relay(&args[2..]);
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let servers = support::servers().unwrap_or_else(|e| panic!("the reference servers: {e}"));
    let everything = servers.everything();
    let server: Vec<String> = std::iter::once(everything.program.display().to_string())
        .chain(everything.args.iter().cloned())
        .collect();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-bench");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let words: Vec<String> = server.iter().map(|w| format!("{w:?}")).collect();
    let policy = format!(
        "[roles.operator]\nceiling = \"unrestricted\"\nallow = [\"everything/*\"]\n\n\
         [servers.everything]\ncommand = [{}]\ntrust = \"trusted\"\nprefix = \"\"\n",
        words.join(", ")
    );
    std::fs::write(dir.join("policy.toml"), policy).unwrap_or_else(|e| panic!("{e}"));

    let relay: Vec<String> = std::iter::once(
        std::env::current_exe()
            .unwrap_or_else(|e| panic!("{e}"))
            .display()
            .to_string(),
    )
    .chain(std::iter::once("--relay".to_owned()))
    .chain(server.iter().cloned())
    .collect();
    let gateway: Vec<String> = [
        env!("CARGO_BIN_EXE_capability"),
        "gateway",
        "--policy",
        &dir.join("policy.toml").display().to_string(),
        "--role",
        "operator",
        "--audit",
        &dir.join("audit.jsonl").display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();

    let paths = [
        ("direct", &server),
        ("relay", &relay),
        ("gateway", &gateway),
    ];
    let mut samples: Vec<Vec<[f64; 3]>> = vec![Vec::new(); paths.len()];
    for _ in 0..ROUNDS {
        for (i, (_, command)) in paths.iter().enumerate() {
            let output = servers
                .ts_latency_stdio(CALLS, command)
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(output.status.success(), "the client failed");
            let line: serde_json::Value = serde_json::from_slice(&output.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
            let at = |key: &str| line[key].as_f64().unwrap_or(f64::NAN);
            samples[i].push([at("p50_us"), at("p99_us"), at("list_p50_us")]);
        }
    }
    let median = |rounds: &[[f64; 3]], k: usize| {
        let mut v: Vec<f64> = rounds.iter().map(|r| r[k]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let figures: Vec<[f64; 3]> = samples
        .iter()
        .map(|rounds| [median(rounds, 0), median(rounds, 1), median(rounds, 2)])
        .collect();
    for ((name, _), f) in paths.iter().zip(&figures) {
        println!(
            "gateway_overhead: {name:<8} tools/call p50 {:>6.0} us  p99 {:>6.0} us  tools/list p50 {:>6.0} us",
            f[0], f[1], f[2]
        );
    }
    let (direct, relay, gateway) = (figures[0], figures[1], figures[2]);
    println!(
        "gateway_overhead: tools/call p50 gateway/direct {:.2}x, gateway/relay {:.2}x, relay/direct {:.2}x; \
         p99 gateway/direct {:.2}x; tools/list p50 gateway/direct {:.2}x ({ROUNDS} rounds x {CALLS} calls)",
        gateway[0] / direct[0],
        gateway[0] / relay[0],
        relay[0] / direct[0],
        gateway[1] / direct[1],
        gateway[2] / direct[2],
    );
}

/// A plain byte relay: spawns `command` and copies standard input to it and its output back.
fn relay(command: &[String]) {
    let Some((program, args)) = command.split_first() else {
        std::process::exit(2);
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("relay: {program}: {e}"));
    let (Some(mut to_child), Some(mut from_child)) = (child.stdin.take(), child.stdout.take())
    else {
        std::process::exit(2);
    };
    // Plain reads and writes, each chunk passed on as it comes (no splicing, no buffering).
    fn pump(from: &mut dyn std::io::Read, to: &mut dyn std::io::Write) {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buffer) {
            if n == 0
                || to
                    .write_all(&buffer[..n])
                    .and_then(|()| to.flush())
                    .is_err()
            {
                break;
            }
        }
    }
    let down = std::thread::spawn(move || {
        pump(&mut std::io::stdin(), &mut to_child);
    });
    pump(&mut from_child, &mut std::io::stdout());
    let _ = down.join();
    let _ = child.wait();
}
