//! The latency a `capability proxy` adds to a tool call: `echo` of the official reference server
//! `server-everything`, called by rmcp's client over stdio, straight to the server, through a
//! plain byte relay (this executable run with `--relay`: a process in between that only copies
//! bytes, what any stdio proxy costs at the least), through `capability proxy` (role
//! `operator`, every call decided and audited into a JSON Lines file) and through `capability
//! gateway` over a fleet of that one server (the same role, its own trail), in the same run,
//! rounds interleaved. Prints p50 and p99 of each and their ratios: the proxy's to direct (the
//! goal) and to the gateway's (the proxy is a gateway of one server: the same cost).
//!
//! `cargo bench -p capability-cli --bench proxy_overhead`
//!
//! Needs Node.js 20+ and npm (the pinned server is installed into `<target>/mcp-servers` by the
//! tests' support module, included here).

use capability_testkit::servers as support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use capability::rmcp::connect_client;
use rmcp::model::CallToolRequestParams;

/// Calls per round and per path, after the warm-up.
const CALLS: usize = 1_000;
const WARM_UP: usize = 200;
const ROUNDS: usize = 3;

const POLICY: &str = "[roles.operator]\nceiling = \"unrestricted\"\nallow = [\"everything/*\"]\n";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--relay") {
        capability_testkit::relay::relay(&args[2..]);
        return;
    }
    // `cargo test --benches` runs this without `--bench`: nothing to time then.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let servers = match support::servers() {
        Ok(servers) => servers,
        Err(reason) => {
            eprintln!("proxy_overhead: the reference servers are needed: {reason}");
            std::process::exit(1);
        }
    };
    let everything = servers.everything();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("proxy-bench");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap_or_else(|e| panic!("{}: {e}", policy.display()));
    let audit = dir.join("audit.jsonl");

    let direct_cmd: Vec<String> = std::iter::once(everything.program.display().to_string())
        .chain(everything.args.iter().cloned())
        .collect();
    let relayed_cmd: Vec<String> = [
        std::env::current_exe()
            .unwrap_or_else(|e| panic!("this bench's executable: {e}"))
            .display()
            .to_string(),
        "--relay".to_owned(),
    ]
    .into_iter()
    .chain(direct_cmd.iter().cloned())
    .collect();
    let mut proxied_cmd: Vec<String> = vec![
        env!("CARGO_BIN_EXE_capability").to_owned(),
        "proxy".to_owned(),
        "--policy".to_owned(),
        policy.display().to_string(),
        "--role".to_owned(),
        "operator".to_owned(),
        "--server".to_owned(),
        "everything".to_owned(),
        "--trust".to_owned(),
        "trusted".to_owned(),
        "--audit".to_owned(),
        audit.display().to_string(),
        "--".to_owned(),
    ];
    proxied_cmd.extend(direct_cmd.iter().cloned());
    let fleet = dir.join("fleet.toml");
    let words: Vec<String> = direct_cmd.iter().map(|w| format!("{w:?}")).collect();
    let fleet_policy = format!(
        "{POLICY}\n[servers.everything]\ncommand = [{}]\ntrust = \"trusted\"\nprefix = \"\"\n",
        words.join(", ")
    );
    std::fs::write(&fleet, fleet_policy).unwrap_or_else(|e| panic!("{}: {e}", fleet.display()));
    let fleet_audit = dir.join("fleet-audit.jsonl");
    let gateway_cmd: Vec<String> = vec![
        env!("CARGO_BIN_EXE_capability").to_owned(),
        "gateway".to_owned(),
        "--policy".to_owned(),
        fleet.display().to_string(),
        "--role".to_owned(),
        "operator".to_owned(),
        "--audit".to_owned(),
        fleet_audit.display().to_string(),
    ];

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut direct, mut relayed, mut proxied, mut gateway) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let _ = std::fs::remove_file(&audit);
        let _ = std::fs::remove_file(&fleet_audit);
        direct.extend(runtime.block_on(latencies(&direct_cmd)));
        relayed.extend(runtime.block_on(latencies(&relayed_cmd)));
        proxied.extend(runtime.block_on(latencies(&proxied_cmd)));
        gateway.extend(runtime.block_on(latencies(&gateway_cmd)));
    }
    let (d50, d99) = (percentile(&mut direct, 0.50), percentile(&mut direct, 0.99));
    let (r50, r99) = (
        percentile(&mut relayed, 0.50),
        percentile(&mut relayed, 0.99),
    );
    let (p50, p99) = (
        percentile(&mut proxied, 0.50),
        percentile(&mut proxied, 0.99),
    );
    let (g50, g99) = (
        percentile(&mut gateway, 0.50),
        percentile(&mut gateway, 0.99),
    );
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!("echo of server-everything, rmcp client over stdio, {ROUNDS} x {CALLS} calls each");
    for (path, p50, p99) in [
        ("direct", d50, d99),
        ("relayed", r50, r99),
        ("proxied", p50, p99),
        ("gateway", g50, g99),
    ] {
        println!(
            "{:<8} p50 {:>7.1} us  p99 {:>7.1} us",
            format!("{path}:"),
            micros(p50),
            micros(p99)
        );
    }
    println!(
        "ratio proxied / direct: p50 {:.2}x (goal <= 1.3x), p99 {:.2}x",
        ratio(p50, d50),
        ratio(p99, d99)
    );
    println!(
        "ratio relayed / direct: p50 {:.2}x (a process in between that only copies bytes)",
        ratio(r50, d50)
    );
    println!(
        "ratio proxied / relayed: p50 {:.2}x (what the proxy's work adds to the hop)",
        ratio(p50, r50)
    );
    println!(
        "ratio gateway / direct: p50 {:.2}x; proxied / gateway: p50 {:.2}x, p99 {:.2}x \
         (the proxy at the gateway's cost)",
        ratio(g50, d50),
        ratio(p50, g50),
        ratio(p99, g99)
    );
}

/// Spawns `command`, connects rmcp's client, warms up, then times [`CALLS`] calls of `echo`.
async fn latencies(command: &[String]) -> Vec<Duration> {
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", command.join(" ")));
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("piped stdio");
    };
    let connection = connect_client((stdout, stdin))
        .await
        .unwrap_or_else(|e| panic!("{}: MCP handshake: {e}", command.join(" ")));
    let peer = connection.peer().clone();
    let mut echo = CallToolRequestParams::new("echo");
    echo.arguments = serde_json::json!({ "message": "bench" })
        .as_object()
        .cloned();
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..WARM_UP + CALLS {
        let start = Instant::now();
        let result = peer
            .call_tool(echo.clone())
            .await
            .unwrap_or_else(|e| panic!("{}: echo: {e}", command.join(" ")));
        let elapsed = start.elapsed();
        assert_ne!(result.is_error, Some(true), "echo failed: {result:?}");
        if i >= WARM_UP {
            times.push(elapsed);
        }
    }
    let _ = connection.cancel().await;
    let _ = child.kill().await;
    times
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    let index = ((times.len() as f64 - 1.0) * p).round() as usize;
    times[index.min(times.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
