//! `capability gateway --metrics`: the Prometheus text exposition counts exactly what the
//! audit trail holds, and a real Prometheus server (the Debian package, started here on
//! loopback with a scrape config) scrapes it and answers PromQL queries with the calls made.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::Value;

use proxy_common::scratch;

/// Set to `1` to make a missing Prometheus a failure rather than a skip (`.ci/run` does).
const REQUIRE: &str = "CAPABILITY_REQUIRE_PROMETHEUS";

/// Waits until `trail` holds `calls` outcomes of `tool`. A lane writes a call's outcome just
/// after its answer (the client may have it first), and the metrics count what the trail
/// holds.
fn wait_for_outcomes(trail: &std::path::Path, tool: &str, calls: usize) {
    let outcomes = || {
        proxy_common::records(trail)
            .iter()
            .filter(|r| r["tool"] == tool && r["phase"] == "outcome")
            .count()
    };
    assert!(
        capability_testkit::wait_for(|| outcomes() == calls),
        "{} outcomes of {tool} on record, not {calls}",
        outcomes()
    );
}

/// A raw HTTP/1.1 request on loopback: the status code and the body (status 0 when nothing
/// listens there yet).
fn http(port: u16, method: &str, path: &str) -> (u16, String) {
    http_with(port, method, path, "Host: 127.0.0.1\r\n")
}

/// [`http`], with these header lines (`Host` among them, each ending in CRLF).
fn http_with(port: u16, method: &str, path: &str, headers: &str) -> (u16, String) {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\n{headers}Connection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The value of the sample `name{labels}` in an exposition, if it is there.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn percent_encoded(query: &str) -> String {
    query
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus server, stopped when dropped.
struct Prometheus(std::process::Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn prometheus_binary() -> Option<std::path::PathBuf> {
    let found = capability_testkit::tier::interop_only("Prometheus").and_then(|()| {
        std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join("prometheus"))
                    .find(|path| path.is_file())
            })
            .ok_or_else(|| "no `prometheus` on PATH (apt-get install prometheus)".to_owned())
    });
    match found {
        Ok(found) => Some(found),
        Err(why) if std::env::var(REQUIRE).as_deref() == Ok("1") => {
            panic!("Prometheus is required ({REQUIRE}=1): {why}")
        }
        Err(why) => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: gateway_metrics: {why} (set {REQUIRE}=1 to make this a failure)"
            );
            None
        }
    }
}

/// The value PromQL `query` gives now, polled until it is `want` (Prometheus scrapes every
/// second, the first time some seconds after it starts).
fn query_until(port: u16, query: &str, want: f64) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = http(
            port,
            "GET",
            &format!("/api/v1/query?query={}", percent_encoded(query)),
        );
        let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let value = answer["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok());
        if status == 200 && value == Some(want) {
            return answer;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "`{query}` did not give {want}: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn prometheus_scrapes_the_gateways_calls_denials_and_latencies() {
    let Some(servers) = support::require_servers("gateway_metrics") else {
        return;
    };
    let Some(prometheus) = prometheus_binary() else {
        return;
    };
    let dir = scratch("gateway-metrics", "");
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "version = \"m1\"\n\n[roles.viewer]\nceiling = \"read-only\"\nallow = [\"drift/shifty\"]\n\n\
             [servers.drift]\ncommand = {}\ntrust = \"trusted\"\nprefix = \"drift_\"\n",
            servers.drift().toml_command()
        ),
    )
    .expect("policy");
    let metrics = capability_testkit::free_port();
    let trail = dir.join("trail.jsonl");
    // Scrapes present this token: the labels name roles, servers and tools.
    let token = "scrape-token-of-the-metrics-test";
    let token_file = dir.join("metrics.token");
    std::fs::write(&token_file, format!("{token}\n")).expect("token file");
    let args = proxy_common::gateway_stdio(
        &dir.join("policy.toml"),
        "viewer",
        &trail,
        &[
            "--metrics",
            &format!("127.0.0.1:{metrics}"),
            "--metrics-token-file",
            &token_file.display().to_string(),
        ],
    );
    let (_child, client) =
        proxy_common::Proxied::spawn_for(&args, (), rmcp::service::ClientLifecycleMode::Initialize)
            .await;
    for _ in 0..3 {
        let mut call = rmcp::model::CallToolRequestParams::new("drift_shifty");
        call.arguments = Some(serde_json::Map::new());
        client.peer().call_tool(call).await.expect("shifty runs");
    }
    for name in ["drift_stable", "drift_made_up"] {
        let mut call = rmcp::model::CallToolRequestParams::new(name);
        call.arguments = Some(serde_json::Map::new());
        assert!(
            client.peer().call_tool(call).await.is_err(),
            "{name} refused"
        );
    }

    wait_for_outcomes(&trail, "shifty", 3);

    // Without the token, with another, or for another Host (DNS rebinding): nothing read.
    let (status, text) = http(metrics, "GET", "/metrics");
    assert_eq!(status, 401, "{text}");
    assert!(!text.contains("drift"), "{text}");
    let bearer = format!("Host: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n");
    let wrong = "Host: 127.0.0.1\r\nAuthorization: Bearer not-the-scrape-token\r\n";
    assert_eq!(http_with(metrics, "GET", "/metrics", wrong).0, 401);
    let rebound = format!("Host: attacker.example:{metrics}\r\nAuthorization: Bearer {token}\r\n");
    let (status, text) = http_with(metrics, "GET", "/metrics", &rebound);
    assert_eq!(status, 403, "{text}");
    assert!(!text.contains("drift"), "{text}");
    // The exposition, straight: what the trail holds, counted.
    let (status, text) = http_with(metrics, "GET", "/metrics", &bearer);
    assert_eq!(status, 200, "{text}");
    let allowed =
        r#"capability_calls_total{server="drift",tool="shifty",role="viewer",verdict="allowed"}"#;
    assert_eq!(sample(&text, allowed), Some(3.0), "{text}");
    let records = proxy_common::records(&trail);
    let denied: Vec<&Value> = records
        .iter()
        .filter(|r| r["verdict"] == "denied")
        .collect();
    assert_eq!(denied.len(), 2, "{records:?}");
    for record in &denied {
        let tool = record["tool"].as_str().expect("tool");
        let server = record["provider"].as_str().unwrap_or("");
        let calls = format!(
            r#"capability_calls_total{{server="{server}",tool="{tool}",role="viewer",verdict="denied"}}"#
        );
        assert_eq!(sample(&text, &calls), Some(1.0), "{calls} in {text}");
        for reason in record["reasons"].as_array().expect("reasons") {
            let code = reason["reason"].as_str().expect("a code");
            let series = format!(
                r#"capability_denials_total{{server="{server}",tool="{tool}",role="viewer",reason="{code}"}}"#
            );
            assert_eq!(sample(&text, &series), Some(1.0), "{series} in {text}");
        }
    }
    let count = r#"capability_call_duration_seconds_count{server="drift",tool="shifty"}"#;
    assert_eq!(sample(&text, count), Some(3.0), "{text}");
    let inf = r#"capability_call_duration_seconds_bucket{server="drift",tool="shifty",le="+Inf"}"#;
    assert_eq!(sample(&text, inf), Some(3.0), "{text}");
    assert_eq!(
        sample(&text, "capability_sessions_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "capability_audit_write_errors_total"),
        Some(0.0)
    );
    assert_eq!(http_with(metrics, "GET", "/", &bearer).0, 404);
    assert_eq!(http_with(metrics, "POST", "/metrics", &bearer).0, 405);

    // A real Prometheus scrapes it.
    let web = capability_testkit::free_port();
    let data = dir.join("prometheus");
    std::fs::create_dir_all(&data).expect("data dir");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: capability\n    authorization:\n      credentials_file: {}\n    \
             static_configs:\n      - targets: ['127.0.0.1:{metrics}']\n",
            token_file.display()
        ),
    )
    .expect("config");
    let _prometheus = Prometheus(
        std::process::Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .arg(format!(
                "--web.console.templates={}",
                dir.join("consoles").display()
            ))
            .arg(format!(
                "--web.console.libraries={}",
                dir.join("console_libraries").display()
            ))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );
    let answer = query_until(
        web,
        r#"sum(capability_calls_total{job="capability",verdict="allowed"})"#,
        3.0,
    );
    assert_eq!(answer["status"], "success");
    query_until(
        web,
        r#"sum(capability_calls_total{job="capability",verdict="denied"})"#,
        2.0,
    );
    query_until(
        web,
        r#"sum(capability_call_duration_seconds_count{tool="shifty"})"#,
        3.0,
    );
    let denials = query_until(web, "count(capability_denials_total) > 0", 2.0);
    assert_eq!(denials["data"]["resultType"], "vector");
    let _ = client.cancel().await;
}

/// `capability proxy --metrics`: the same families, counted from the proxy's trail.
#[tokio::test(flavor = "current_thread")]
async fn the_proxy_serves_the_same_metrics_counted_from_its_trail() {
    let Some(servers) = support::require_servers("proxy_metrics") else {
        return;
    };
    let dir = scratch(
        "proxy-metrics",
        "version = \"m1\"\n\n[roles.viewer]\nceiling = \"read-only\"\nallow = [\"drift/shifty\"]\n",
    );
    let metrics = capability_testkit::free_port();
    let trail = dir.join("trail.jsonl");
    let address = format!("127.0.0.1:{metrics}");
    let args = proxy_common::proxy_args(
        &dir,
        "viewer",
        "drift",
        &trail,
        &["--trust", "trusted", "--metrics", &address],
        &servers.drift(),
    );
    let proxied = proxy_common::Proxied::start(&args).await;
    for _ in 0..2 {
        proxied
            .call("shifty", serde_json::json!({}))
            .await
            .expect("shifty runs");
    }
    assert!(proxied.call("stable", serde_json::json!({})).await.is_err());
    wait_for_outcomes(&trail, "shifty", 2);
    let (status, text) = http(metrics, "GET", "/metrics");
    assert_eq!(status, 200, "{text}");
    let records = proxy_common::records(&trail);
    let count = |tool: &str, verdict: &str| {
        records
            .iter()
            .filter(|r| r["tool"] == tool && r["verdict"] == verdict && r["phase"] != "outcome")
            .count() as f64
    };
    for (tool, verdict) in [("shifty", "allowed"), ("stable", "denied")] {
        let series = format!(
            r#"capability_calls_total{{server="drift",tool="{tool}",role="viewer",verdict="{verdict}"}}"#
        );
        assert_eq!(
            sample(&text, &series),
            Some(count(tool, verdict)),
            "{series} in {text}"
        );
    }
    assert_eq!(count("shifty", "allowed"), 2.0);
    let observed = r#"capability_call_duration_seconds_count{server="drift",tool="shifty"}"#;
    assert_eq!(sample(&text, observed), Some(2.0), "{text}");
    proxied.close().await;
}
