//! `capability proxy --listen` against the server it governs, over Streamable HTTP: `echo` of
//! `server-everything` (itself serving Streamable HTTP), called by rmcp's HTTP client straight
//! to the server, and through the proxy with OAuth access tokens (JWT, checked against a real
//! authorization server's keys: `oidc-provider`), with the bearer-token table, and with the
//! server spawned over stdio behind the proxy; and `capability gateway --listen` over a fleet
//! of that one server (over HTTP, and spawned over stdio). One client; 8 clients in lock-step
//! (each turn, every client calls once, all at once, and the turn waits for the slowest); 8
//! clients each in its own loop (each turn, every client makes 10 calls back to back). The paths
//! are measured in turns (every path's clients connected at once, each turn calling every path
//! in a shuffled order). Prints p50 and p99 per call, calls per second, the ratios to
//! direct, and each round's own p50 ratio. The TypeScript SDK's client is then run the same
//! way, one client per path, the paths in turns (a process per round).
//!
//! `cargo bench -p capability-cli --bench proxy_http`
//!
//! Needs Node.js 20+ and npm (the pinned servers are installed into `<target>/mcp-servers`).

use capability_testkit::Rng;
use capability_testkit::servers as support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncBufReadExt, BufReader};

use support::auth::AuthServer;

/// Calls per client per round, after the warm-up.
const CALLS: usize = 400;
const WARM_UP: usize = 50;
const ROUNDS: usize = 3;
const TABLE_TOKEN: &str = "bench-table-token";

/// A child that says on standard error (or out) when it listens.
async fn start(mut command: tokio::process::Command, says: &str) -> tokio::process::Child {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let mut lines = BufReader::new(child.stderr.take().unwrap_or_else(|| panic!("piped"))).lines();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(says) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "the child never said {says:?}");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

async fn client(url: &str, token: Option<&str>) -> RunningService<RoleClient, ClientConfig> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    ClientConfig::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap_or_else(|e| panic!("{url}: connects: {e}"))
}

/// Every path's `clients` clients connected at once, warmed up, then turns: each turn calls
/// every path (its `clients` clients at once, each making `in_turn` calls back to back, every
/// client in its own loop), in an order shuffled each turn, so whatever the machine does during
/// the round falls on every path alike (measured one after the other, `gateway_overhead`'s same
/// relay moved by a third between rounds on this machine); [`CALLS`] calls per client in all.
/// With `in_turn` 1 the clients go in lock-step: their calls arrive together, and a turn waits
/// for the slowest. Each path's latencies, and its calls per second over the time spent in its
/// own turns.
async fn measure_in_turns(
    paths: &[(&str, &str, Option<&str>)],
    clients: usize,
    in_turn: usize,
    rng: &mut Rng,
) -> Vec<(Vec<Duration>, f64)> {
    let mut connected = Vec::new();
    for (_, url, token) in paths {
        let mut these = Vec::new();
        for _ in 0..clients {
            these.push(client(url, *token).await);
        }
        connected.push(these);
    }
    let mut echo = CallToolRequestParams::new("echo");
    echo.arguments = serde_json::json!({ "message": "bench" })
        .as_object()
        .cloned();
    for these in &connected {
        for c in these {
            for _ in 0..WARM_UP {
                c.peer()
                    .call_tool(echo.clone())
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    let mut measured: Vec<(Vec<Duration>, Duration)> =
        vec![(Vec::with_capacity(CALLS * clients), Duration::ZERO); paths.len()];
    let mut order: Vec<usize> = (0..paths.len()).collect();
    for _ in 0..CALLS / in_turn {
        shuffle(&mut order, rng);
        for &i in &order {
            let started = Instant::now();
            let mut calls = tokio::task::JoinSet::new();
            for c in &connected[i] {
                let peer = c.peer().clone();
                let echo = echo.clone();
                calls.spawn(async move {
                    let mut times = Vec::with_capacity(in_turn);
                    for _ in 0..in_turn {
                        let t = Instant::now();
                        let result = peer
                            .call_tool(echo.clone())
                            .await
                            .unwrap_or_else(|e| panic!("{e}"));
                        assert_ne!(result.is_error, Some(true), "{result:?}");
                        times.push(t.elapsed());
                    }
                    times
                });
            }
            while let Some(times) = calls.join_next().await {
                measured[i]
                    .0
                    .extend(times.unwrap_or_else(|e| panic!("{e}")));
            }
            measured[i].1 += started.elapsed();
        }
    }
    for these in connected {
        for c in these {
            let _ = c.cancel().await;
        }
    }
    measured
        .into_iter()
        .map(|(times, spent)| {
            let rate = times.len() as f64 / spent.as_secs_f64();
            (times, rate)
        })
        .collect()
}

/// Shuffles `order` (Fisher-Yates: the order only needs to change between turns).
fn shuffle(order: &mut [usize], rng: &mut Rng) {
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    let index = ((times.len() as f64 - 1.0) * p).round() as usize;
    times[index.min(times.len() - 1)]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let servers = support::servers().unwrap_or_else(|e| panic!("the reference servers: {e}"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("proxy-http-bench");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(run(&servers, &dir));
}

async fn run(servers: &support::Servers, dir: &Path) {
    let everything = servers.everything();
    let direct_port = capability_testkit::free_port();
    let mut direct = tokio::process::Command::new(&everything.program);
    direct
        .arg(&everything.args[0])
        .arg("streamableHttp")
        .env("PORT", direct_port.to_string());
    let _direct = start(direct, "listening").await;
    let direct_url = format!("http://127.0.0.1:{direct_port}/mcp");

    let auth = AuthServer::start(
        servers,
        dir,
        &serde_json::json!({"port": 0, "clients": [
            {"client_id": "bench", "client_secret": "bench-secret", "scope": "mcp:admin", "alg": "ES256", "ttl": 3600}
        ]}),
    );
    let bin = env!("CARGO_BIN_EXE_capability");
    let proxy = |name: &str, policy: String, upstream: Option<&str>| {
        let port = capability_testkit::free_port();
        let path = dir.join(format!("{name}.toml"));
        let url = format!("http://127.0.0.1:{port}/mcp");
        std::fs::write(&path, policy.replace("{url}", &url)).unwrap_or_else(|e| panic!("{e}"));
        let mut command = tokio::process::Command::new(bin);
        command
            .arg("proxy")
            .arg("--policy")
            .arg(&path)
            .args(["--server", "everything", "--trust", "trusted", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--audit")
            .arg(dir.join(format!("{name}.jsonl")))
            .args(["--max-calls", "100000000"]);
        match upstream {
            Some(url) => {
                command.arg("--upstream").arg(url);
            }
            None => {
                command
                    .arg("--")
                    .arg(&everything.program)
                    .args(&everything.args);
            }
        }
        (command, url)
    };
    let roles = "[roles.operator]\nceiling = \"unrestricted\"\nallow = [\"everything/*\"]\n";
    let jwt_policy = format!(
        "{roles}[auth]\nissuer = \"{}\"\naudience = \"{{url}}\"\n[auth.scope_roles]\n\"mcp:admin\" = \"operator\"\n[http]\nrate_per_second = 1000000\nrate_burst = 1000000\n",
        auth.issuer
    );
    let hash = capability_rules::sha256_hex(TABLE_TOKEN.as_bytes());
    let table_policy = format!(
        "{roles}[bearer_tokens]\n\"sha256:{hash}\" = \"operator\"\n[http]\nrate_per_second = 1000000\nrate_burst = 1000000\n"
    );
    let (jwt_http, jwt_http_url) = proxy("jwt-http", jwt_policy.clone(), Some(&direct_url));
    let _jwt_http = start(jwt_http, "listening on").await;
    let (jwt_stdio, jwt_stdio_url) = proxy("jwt-stdio", jwt_policy, None);
    let _jwt_stdio = start(jwt_stdio, "listening on").await;
    let (table, table_url) = proxy("table-stdio", table_policy, None);
    let _table = start(table, "listening on").await;
    // `capability gateway --listen` over a fleet of that one server, reached over HTTP or
    // spawned over stdio; the token table.
    let gateway = |name: &str, server: String| {
        let port = capability_testkit::free_port();
        let path = dir.join(format!("{name}.toml"));
        let url = format!("http://127.0.0.1:{port}/mcp");
        let policy = format!(
            "{roles}[bearer_tokens]\n\"sha256:{hash}\" = \"operator\"\n[http]\nrate_per_second = 1000000\nrate_burst = 1000000\n\n[servers.everything]\n{server}\ntrust = \"trusted\"\nprefix = \"\"\n"
        );
        std::fs::write(&path, policy).unwrap_or_else(|e| panic!("{e}"));
        let mut command = tokio::process::Command::new(bin);
        command
            .arg("gateway")
            .arg("--policy")
            .arg(&path)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--audit")
            .arg(dir.join(format!("{name}.jsonl")))
            .args(["--max-calls", "100000000"]);
        (command, url)
    };
    let words: Vec<String> = std::iter::once(everything.program.display().to_string())
        .chain(everything.args.iter().cloned())
        .map(|w| format!("{w:?}"))
        .collect();
    let (gw_http, gw_http_url) = gateway("gateway-http", format!("url = {direct_url:?}"));
    let _gw_http = start(gw_http, "listening on").await;
    let (gw_stdio, gw_stdio_url) =
        gateway("gateway-stdio", format!("command = [{}]", words.join(", ")));
    let _gw_stdio = start(gw_stdio, "listening on").await;
    let jwt = auth
        .token("bench", "bench-secret", "mcp:admin", Some(&jwt_http_url))
        .unwrap_or_else(|e| panic!("{e}"));
    let jwt_stdio_token = auth
        .token("bench", "bench-secret", "mcp:admin", Some(&jwt_stdio_url))
        .unwrap_or_else(|e| panic!("{e}"));

    let paths: [(&str, &str, Option<&str>); 6] = [
        ("direct (server over HTTP)", &direct_url, None),
        ("proxy, JWT, server over HTTP", &jwt_http_url, Some(&jwt)),
        (
            "proxy, JWT, server over stdio",
            &jwt_stdio_url,
            Some(&jwt_stdio_token),
        ),
        (
            "proxy, token table, server over stdio",
            &table_url,
            Some(TABLE_TOKEN),
        ),
        (
            "gateway, token table, server over HTTP",
            &gw_http_url,
            Some(TABLE_TOKEN),
        ),
        (
            "gateway, token table, server over stdio",
            &gw_stdio_url,
            Some(TABLE_TOKEN),
        ),
    ];
    println!(
        "echo of server-everything over Streamable HTTP, rmcp's client, {ROUNDS} rounds of {CALLS} calls per client"
    );
    let mut rng = Rng::seeded(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    );
    // One client; 8 in lock-step (every turn, each client one call, all at once); 8 each in its
    // own loop (every turn, each client 10 calls back to back).
    for (clients, in_turn, load) in [
        (1, 1, "1 client"),
        (8, 1, "8 clients in lock-step"),
        (8, 10, "8 clients in loops"),
    ] {
        let mut results: Vec<(Vec<Duration>, Vec<f64>)> =
            vec![(Vec::new(), Vec::new()); paths.len()];
        // Each round's p50 of every path over direct's in the same round.
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        for _ in 0..ROUNDS {
            let round = measure_in_turns(&paths, clients, in_turn, &mut rng).await;
            let mut direct = round[0].0.clone();
            let direct_p50 = percentile(&mut direct, 0.50).as_secs_f64();
            for (i, (mut times, rate)) in round.into_iter().enumerate() {
                ratios[i].push(percentile(&mut times, 0.50).as_secs_f64() / direct_p50);
                results[i].0.extend(times);
                results[i].1.push(rate);
            }
        }
        let mut summary = Vec::new();
        for (i, (times, rates)) in results.iter_mut().enumerate() {
            let (p50, p99) = (percentile(times, 0.50), percentile(times, 0.99));
            rates.sort_by(f64::total_cmp);
            summary.push((paths[i].0, p50, p99, rates[rates.len() / 2]));
        }
        let (_, d50, d99, _) = summary[0];
        for (i, (name, p50, p99, rate)) in summary.iter().enumerate() {
            ratios[i].sort_by(f64::total_cmp);
            let rounds: Vec<String> = ratios[i].iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "{load:<22} {name:<40} p50 {:>7.0} us  p99 {:>7.0} us  {:>7.0} calls/s  p50 {:.2}x  p99 {:.2}x direct  (rounds: {})",
                p50.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6,
                rate,
                p50.as_secs_f64() / d50.as_secs_f64(),
                p99.as_secs_f64() / d99.as_secs_f64(),
                rounds.join(" "),
            );
        }
    }
    // The official TypeScript SDK client too (Node's fetch): one client per path, all in one
    // process, the calls taken in turns as above; a process per round.
    println!(
        "the same, the TypeScript SDK's client, one client per path, in turns, {ROUNDS} rounds of {CALLS} calls"
    );
    let commands: Vec<Vec<String>> = paths
        .iter()
        .map(|(_, url, token)| {
            std::iter::once(url.to_string())
                .chain(token.map(str::to_owned))
                .collect()
        })
        .collect();
    let commands: Vec<&[String]> = commands.iter().map(Vec::as_slice).collect();
    let mut ts: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); paths.len()];
    let mut ts_ratios: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    for _ in 0..ROUNDS {
        let output = servers
            .ts_latency_interleaved(CALLS, &commands)
            .output()
            .unwrap_or_else(|e| panic!("node: {e}"));
        let line: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
        let measured = line["paths"].as_array().unwrap_or_else(|| panic!("{line}"));
        let us = |i: usize, k: &str| measured[i][k].as_f64().unwrap_or_else(|| panic!("{line}"));
        for i in 0..paths.len() {
            ts[i].0.push(us(i, "p50_us"));
            ts[i].1.push(us(i, "p99_us"));
            ts_ratios[i].push(us(i, "p50_us") / us(0, "p50_us"));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (d50, d99) = (median(&mut ts[0].0.clone()), median(&mut ts[0].1.clone()));
    for (i, (p50s, p99s)) in ts.iter_mut().enumerate() {
        let (p50, p99) = (median(p50s), median(p99s));
        ts_ratios[i].sort_by(f64::total_cmp);
        let rounds: Vec<String> = ts_ratios[i].iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "TypeScript client, {:<40} p50 {p50:>7.0} us  p99 {p99:>7.0} us  p50 {:.2}x  p99 {:.2}x direct  (rounds: {})",
            paths[i].0,
            p50 / d50,
            p99 / d99,
            rounds.join(" "),
        );
    }
    auth.stop();
}
