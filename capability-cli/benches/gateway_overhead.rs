//! The latency `capability gateway` adds, against the server straight and against a plain byte
//! relay: the official TypeScript SDK client calls `echo` of `server-everything` (and lists its
//! tools) over stdio, (1) spawning the server itself, (2) spawning a relay that spawns the
//! server and copies bytes both ways (this benchmark's own executable, run with `--relay`: two
//! threads, `std::io::copy`), (3) spawning `capability gateway` over a fleet of that one server
//! (role `operator`, every call routed, decided and audited into a JSON Lines file), (4) the
//! gateway with `--otlp` to a loopback receiver of its own, (5) the relay again, run with
//! `--relay-reactor`: waiting on one thread's tokio reactor, and (6) the relay doing the audit's
//! work (`--relay-audited`: each call parsed, decided, its intent sealed and written before it
//! is passed on, its outcome after), the least a governed call can add.
//!
//! The paths are measured in turns, not one after the other: each round one client process
//! holds a client for every path, all connected, and takes the calls in turns (each turn calls
//! every path once, in a shuffled order), so a machine whose speed drifts during the round
//! slows every path alike. Two sets a round: the goal's three paths (1, 2, 3), then (2) to (6),
//! whose extra processes (the exporter of (4) above all) would weigh on the goal's figures.
//! Prints the medians over the rounds of each path's p50 and p99, each round's own ratios, and
//! their medians.
//!
//! Then the gateway's start: the time from spawning it to the answer to the first `tools/list`
//! (initialize, initialized, list, over pipes), against the server spawned straight; and its
//! memory (resident set, `VmRSS`): idle over fleets of 1 and of 4 servers (per idle server:
//! the difference over 3, the servers' own processes not counted), and over HTTP (`--listen`)
//! before and after 50 sessions are opened (per session: the difference over 50); and its own
//! CPU time per call (`/proc/<pid>/stat`, over 3,000 calls written on its pipes), against the
//! relay's in the same rounds.
//!
//! `cargo bench -p capability-cli --bench gateway_overhead`
//!
//! Needs Node.js 20+ and npm (the pinned packages are installed by the tests' support module).

use capability_testkit::relay::{relay, spawned};
use capability_testkit::servers as support;

use std::path::Path;
use std::process::{Command, Stdio};

const CALLS: usize = 1_000;
const ROUNDS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--relay") {
        relay(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--relay-reactor") {
        relay_reactor(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--relay-audited") {
        let Some((trail, command)) = args[2..].split_first() else {
            std::process::exit(2);
        };
        relay_audited(trail, command);
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

    // (4) the gateway exporting its spans and durations (`--otlp`) to a receiver of this run's.
    let receiver = support::OtlpReceiver::start();
    // A trail of its own: it runs beside (3), and a JSON Lines trail has one writer.
    let traced: Vec<String> = gateway
        .iter()
        .map(|word| match word.ends_with("audit.jsonl") {
            true => dir.join("otlp.jsonl").display().to_string(),
            false => word.clone(),
        })
        .chain(["--otlp".to_owned(), receiver.url.clone()])
        .collect();
    // (5) the relay again, on one thread's reactor as the gateway is (epoll, one thread for
    // both directions), doing nothing else: what the gateway's way of waiting costs by itself.
    let reactor: Vec<String> = relay
        .iter()
        .map(|word| match word.as_str() {
            "--relay" => "--relay-reactor".to_owned(),
            _ => word.clone(),
        })
        .collect();
    // (6) the relay again, doing on each `echo` call what every governed call must: its line
    // parsed, decided and its intent sealed and written to a JSON Lines trail before it is
    // passed on, its outcome after the answer (`--relay-audited`, the same dispatcher and sink).
    let audited: Vec<String> = relay
        .iter()
        .flat_map(|word| match word.as_str() {
            "--relay" => vec![
                "--relay-audited".to_owned(),
                dir.join("relay-audit.jsonl").display().to_string(),
            ],
            _ => vec![word.clone()],
        })
        .collect();
    let paths = [
        ("direct", &server),
        ("relay", &relay),
        ("gateway", &gateway),
        ("otlp", &traced),
        ("reactor", &reactor),
        ("audited", &audited),
    ];
    // Each round, one client per path, all connected at once, the calls taken in turns (every
    // path once a turn, in a shuffled order): whatever the machine does during the round falls
    // on every path alike. (Run one after the other, the same relay measured 0.75x to 1.41x
    // itself between rounds on this machine; in turns, 1.00x to 1.03x.) Two sets a round: the
    // goal's (direct, relay, gateway), then the gateway beside the paths that tell its cost
    // apart (--otlp, whose exporter works in the background of every path of its set, the
    // reactor, the audited relay), with the relay again as the baseline of both.
    const GOAL: [usize; 3] = [0, 1, 2];
    const APART: [usize; 5] = [1, 2, 3, 4, 5];
    let mut samples: Vec<Vec<[f64; 3]>> = vec![Vec::new(); paths.len()];
    // The samples of the second set, where the relay and the gateway are measured again.
    let mut apart: Vec<Vec<[f64; 3]>> = vec![Vec::new(); paths.len()];
    for _ in 0..ROUNDS {
        for (set, into) in [(&GOAL[..], &mut samples), (&APART[..], &mut apart)] {
            let commands: Vec<&[String]> = set.iter().map(|&i| paths[i].1.as_slice()).collect();
            let output = servers
                .ts_latency_interleaved(CALLS, &commands)
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(output.status.success(), "the client failed");
            let line: serde_json::Value = serde_json::from_slice(&output.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
            for (k, &i) in set.iter().enumerate() {
                let at = |key: &str| line["paths"][k][key].as_f64().unwrap_or(f64::NAN);
                into[i].push([at("p50_us"), at("p99_us"), at("list_p50_us")]);
            }
        }
    }
    let median = |rounds: &[[f64; 3]], k: usize| {
        let mut v: Vec<f64> = rounds.iter().map(|r| r[k]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let medians = |rounds: &[[f64; 3]]| [median(rounds, 0), median(rounds, 1), median(rounds, 2)];
    let figures: Vec<[f64; 3]> = paths
        .iter()
        .enumerate()
        .map(|(i, _)| match samples[i].is_empty() {
            true => medians(&apart[i]),
            false => medians(&samples[i]),
        })
        .collect();
    for ((name, _), f) in paths.iter().zip(&figures) {
        println!(
            "gateway_overhead: {name:<8} tools/call p50 {:>6.0} us  p99 {:>6.0} us  tools/list p50 {:>6.0} us",
            f[0], f[1], f[2]
        );
    }
    let (direct, relay, gateway) = (figures[0], figures[1], figures[2]);
    // Each round's own ratios too: a machine whose speed drifts between rounds moves the paths
    // of one round together, so their ratio keeps still where the medians of each do not.
    let paired = |set: &[Vec<[f64; 3]>], a: usize, b: usize| {
        let mut ratios: Vec<f64> = set[a]
            .iter()
            .zip(&set[b])
            .map(|(x, y)| x[0] / y[0])
            .collect();
        ratios.sort_by(f64::total_cmp);
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        (ratios[ratios.len() / 2], shown.join(" "))
    };
    let ((to_direct, each_direct), (to_relay, each_relay)) =
        (paired(&samples, 2, 0), paired(&samples, 2, 1));
    println!(
        "gateway_overhead: tools/call p50 ratios within each round: gateway/direct median {to_direct:.2}x ({each_direct}), gateway/relay median {to_relay:.2}x ({each_relay})"
    );
    println!(
        "gateway_overhead: tools/call p50 gateway/direct {:.2}x, gateway/relay {:.2}x, relay/direct {:.2}x; \
         p99 gateway/direct {:.2}x; tools/list p50 gateway/direct {:.2}x ({ROUNDS} rounds x {CALLS} calls)",
        gateway[0] / direct[0],
        gateway[0] / relay[0],
        relay[0] / direct[0],
        gateway[1] / direct[1],
        gateway[2] / direct[2],
    );
    let (again, _) = paired(&apart, 2, 1);
    let ((reactor_to_relay, each_reactor), (to_reactor, _)) =
        (paired(&apart, 4, 1), paired(&apart, 2, 4));
    println!(
        "gateway_overhead: beside the paths below, the gateway: {again:.2}x the relay; the relay on one reactor thread: tools/call p50 {:.0} us, {reactor_to_relay:.2}x the threaded relay within each round ({each_reactor}); the gateway {to_reactor:.2}x it",
        figures[4][0],
    );
    let (traced_to_gateway, each_traced) = paired(&apart, 3, 2);
    println!(
        "gateway_overhead: with --otlp, tools/call p50 {traced_to_gateway:.2}x the gateway without within each round ({each_traced}); {} exports received",
        receiver.posts.lock().map_or(0, |posts| posts.len()),
    );
    let ((audited_to_relay, each_audited), (to_audited, _)) =
        (paired(&apart, 5, 1), paired(&apart, 2, 5));
    println!(
        "gateway_overhead: the relay doing the audit's work (decided, intent and outcome sealed and written): tools/call p50 {:.0} us, {audited_to_relay:.2}x the relay within each round ({each_audited}); the gateway {to_audited:.2}x it",
        figures[5][0],
    );
    start_and_memory(&dir, &server, &words, paths[1].1, paths[5].1);
}

/// Spawns `command` with pipes; initializes (2025-11-25) and lists its tools. The time to the
/// listing's answer, and the child (still running).
fn start_and_list(command: &[String]) -> (std::time::Duration, std::process::Child) {
    let (elapsed, child, input, output) = start_listed(command);
    // Kept open (and so running) until the caller is done with it.
    std::mem::forget((input, output));
    (elapsed, child)
}

type Listed = (
    std::time::Duration,
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
);

/// [`start_and_list`], with the child's pipes.
fn start_listed(command: &[String]) -> Listed {
    use std::io::{BufReader, Write};
    let started = std::time::Instant::now();
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", command[0]));
    let mut input = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
    let mut output = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout")));
    let mut answer = |id: u64| read_answer(&mut output, id);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    writeln!(input, "{init}").unwrap_or_else(|e| panic!("{e}"));
    answer(1);
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .and_then(|()| writeln!(input, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#))
    .unwrap_or_else(|e| panic!("{e}"));
    let listed = answer(2);
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{listed}"
    );
    (started.elapsed(), child, input, output)
}

fn read_answer(output: &mut impl std::io::BufRead, id: u64) -> serde_json::Value {
    loop {
        let mut line = String::new();
        if output.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("ended before answering {id}");
        }
        let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if value["id"] == id {
            return value;
        }
    }
}

/// The CPU time (user and system) process `pid` has used, in microseconds.
fn cpu_us(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest.split(' ').collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // utime and stime, in clock ticks of 10 ms.
    (ticks(11) + ticks(12)) * 10_000.0
}

/// The own CPU time per `echo` call of the process `command` starts (the relay's two threads,
/// or the gateway; the server's process not counted), over `calls` calls of the tool `echo`
/// (as `command` shows it) written line by line on its pipes.
fn cpu_per_call(command: &[String], echo: &str, calls: u64) -> f64 {
    use std::io::Write;
    let (_, child, mut input, mut output) = start_listed(command);
    let before = cpu_us(child.id());
    for id in 100..100 + calls {
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{echo}","arguments":{{"message":"bench"}}}}}}"#
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let answer = read_answer(&mut output, id);
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let used = cpu_us(child.id()) - before;
    drop(input);
    stop(child);
    used / calls as f64
}

/// The resident set of process `pid`, in KiB.
fn rss_kib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(f64::NAN)
}

fn stop(mut child: std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Start time, memory per idle server and per HTTP session, and the CPU per call of the
/// gateway and of the relay.
fn start_and_memory(
    dir: &Path,
    server: &[String],
    words: &[String],
    relay: &[String],
    auditing: &[String],
) {
    let fleet = |n: usize| {
        let mut policy = String::from(
            "[roles.operator]\nceiling = \"unrestricted\"\nallow = [\"*\"]\n\n[bearer_tokens]\n",
        );
        policy.push_str(&format!(
            "\"sha256:{}\" = \"operator\"\n",
            capability_rules::sha256_hex(b"bench-token")
        ));
        policy.push_str("\n[http]\nmax_sessions_per_principal = 1000\n");
        for i in 0..n {
            policy.push_str(&format!(
                "\n[servers.e{i}]\ncommand = [{}]\ntrust = \"trusted\"\nprefix = \"e{i}_\"\n",
                words.join(", ")
            ));
        }
        let path = dir.join(format!("fleet-{n}.toml"));
        std::fs::write(&path, policy).unwrap_or_else(|e| panic!("{e}"));
        path
    };
    let gateway = |policy: &Path, audit: &str| -> Vec<String> {
        [
            env!("CARGO_BIN_EXE_capability"),
            "gateway",
            "--policy",
            &policy.display().to_string(),
            "--role",
            "operator",
            "--audit",
            &dir.join(audit).display().to_string(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    let (one, four) = (fleet(1), fleet(4));
    let mut direct = Vec::new();
    let mut through = Vec::new();
    let mut rss = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (took, child) = start_and_list(server);
        direct.push(took.as_secs_f64() * 1e3);
        stop(child);
        let (took, child) = start_and_list(&gateway(&one, &format!("start-{round}.jsonl")));
        through.push(took.as_secs_f64() * 1e3);
        std::thread::sleep(std::time::Duration::from_millis(300));
        rss.0.push(rss_kib(child.id()));
        stop(child);
        let (_, child) = start_and_list(&gateway(&four, &format!("four-{round}.jsonl")));
        std::thread::sleep(std::time::Duration::from_millis(300));
        rss.1.push(rss_kib(child.id()));
        stop(child);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (d, g) = (median(&mut direct), median(&mut through));
    println!(
        "gateway_overhead: start to the first tools/list answer: server straight {d:.0} ms, gateway over it {g:.0} ms ({:.0} ms more, {ROUNDS} rounds)",
        g - d
    );
    // The relay's CPU in the same rounds: what passing the bytes on costs this machine; and
    // the relay doing the audit's work: what the audit costs it.
    let (mut cpu, mut relayed, mut audited) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        cpu.push(cpu_per_call(
            &gateway(&one, &format!("cpu-{round}.jsonl")),
            "e0_echo",
            3_000,
        ));
        relayed.push(cpu_per_call(relay, "echo", 3_000));
        audited.push(cpu_per_call(auditing, "echo", 3_000));
    }
    let (cpu, relayed, audited) = (median(&mut cpu), median(&mut relayed), median(&mut audited));
    println!(
        "gateway_overhead: own CPU per echo call (user + system, 3,000 calls over pipes, median of {ROUNDS}): gateway {cpu:.0} us, relay {relayed:.0} us ({:.0} us more), the relay doing the audit's work {audited:.0} us",
        cpu - relayed
    );
    let (r1, r4) = (median(&mut rss.0), median(&mut rss.1));
    println!(
        "gateway_overhead: gateway resident set idle: 1 server {:.1} MiB, 4 servers {:.1} MiB: {:.0} KiB per idle server",
        r1 / 1024.0,
        r4 / 1024.0,
        (r4 - r1) / 3.0
    );

    // Sessions over HTTP.
    let port = capability_testkit::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_capability"))
        .args(["gateway", "--policy"])
        .arg(&one)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--audit")
        .arg(dir.join("sessions.jsonl"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    {
        use std::io::BufRead;
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("stderr"));
        let mut lines = std::io::BufReader::new(stderr).lines();
        while let Some(Ok(line)) = lines.next() {
            if line.contains("listening on") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}});
    let open = |n: usize| {
        for _ in 0..n {
            let answer = support::raw_post(&url, &[("Authorization", "Bearer bench-token")], &init);
            assert_eq!(answer.status, 200, "{}", answer.body);
        }
    };
    open(5);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = rss_kib(child.id());
    open(50);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = rss_kib(child.id());
    println!(
        "gateway_overhead: over HTTP, 50 sessions opened: resident set {:.1} MiB -> {:.1} MiB: {:.0} KiB per session",
        before / 1024.0,
        after / 1024.0,
        (after - before) / 50.0
    );
    stop(child);
}

/// `--relay-reactor <command...>`: the relay of [`relay`], waiting as the gateway does: on a
/// current-thread tokio runtime, standard input registered with its reactor (a pipe or a
/// socket, whichever the client gave) and the server's pipes tokio's, one task per direction;
/// standard output written straight away, as the gateway writes it (registered only while a
/// write would block, which a client reading its answers never makes happen here).
fn relay_reactor(command: &[String]) {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

    let Some((program, args)) = command.split_first() else {
        std::process::exit(2);
    };
    /// Standard input on the reactor.
    fn standard_input() -> std::io::Result<Box<dyn AsyncRead + Unpin>> {
        let input = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
        if input.metadata()?.file_type().is_socket() {
            let input = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(input));
            input.set_nonblocking(true)?;
            Ok(Box::new(tokio::net::UnixStream::from_std(input)?))
        } else {
            Ok(Box::new(tokio::net::unix::pipe::Receiver::from_file(
                input,
            )?))
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("relay: {e}"));
    runtime.block_on(async {
        let input = standard_input().unwrap_or_else(|e| panic!("relay: {e}"));
        let mut child = tokio::process::Command::new(program)
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
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let down = tokio::task::spawn_local(async move {
                    let mut input = input;
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(n) = input.read(&mut buffer).await {
                        if n == 0 || to_child.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                let mut output = std::io::stdout().lock();
                let mut buffer = vec![0u8; 64 * 1024];
                while let Ok(n) = from_child.read(&mut buffer).await {
                    if n == 0
                        || output
                            .write_all(&buffer[..n])
                            .and_then(|()| output.flush())
                            .is_err()
                    {
                        break;
                    }
                }
                let _ = down.await;
            })
            .await;
        let _ = child.wait().await;
    });
}

/// `--relay-audited <trail> <command...>`: the relay of [`relay`], two threads, doing on each
/// `tools/call` of `echo` what a governed call must, through the same dispatcher and sink as
/// the gateway: the line parsed (its envelope, then its arguments), the call decided, its intent
/// sealed and written to the JSON Lines trail before the line is passed on, its outcome
/// written once the answer has gone to the client. Nothing else: no routing, no ids of its
/// own, one call at a time. What the audit costs a relay, the least a governed call can add.
fn relay_audited(trail: &str, command: &[String]) {
    use capability::audit::{AuditedDispatch, Budget, Caller, FlushPolicy, JsonlSink, Outcome};
    use capability::authz::{Ceiling, ToolContext};
    use serde_json::value::RawValue;
    use std::io::{BufRead, Write};
    use std::sync::{Arc, Mutex};

    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        params: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        name: String,
        #[serde(default)]
        arguments: Option<serde_json::Value>,
    }
    let sink = JsonlSink::open(trail, FlushPolicy::EveryRecord)
        .unwrap_or_else(|e| panic!("relay: {trail}: {e}"));
    let dispatch = AuditedDispatch::new(Arc::new(sink)).with_budget(Budget {
        max_calls: u32::MAX,
        max_denials: u32::MAX,
    });
    let tool = capability::CapabilityManifest::builder("echo")
        .provider("everything")
        .read_only(true)
        .build()
        .unwrap_or_else(|e| panic!("relay: {e}"));
    let ctx = ToolContext::new("operator", "stdio", Ceiling::Unrestricted);
    let (mut child, mut to_child, from_child) = spawned(command);
    // The id of the call waiting, and the way its answer is told to the reading thread.
    let waiting: Arc<Mutex<Option<String>>> = Arc::default();
    let (answered, answer) = std::sync::mpsc::channel::<()>();
    let watched = waiting.clone();
    let up = std::thread::spawn(move || {
        let mut from = std::io::BufReader::new(from_child);
        let mut out = std::io::stdout().lock();
        let mut line = Vec::new();
        loop {
            line.clear();
            match from.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            // Read strictly, as the gateway reads a server's lines.
            let _ = capability::json::no_duplicate_keys(std::str::from_utf8(&line).unwrap_or(""));
            if out.write_all(&line).and_then(|()| out.flush()).is_err() {
                break;
            }
            let mut waiting = watched
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(id) = waiting.as_deref()
                && let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(&line)
                && envelope.method.is_none()
                && envelope.id.is_some_and(|i| i.get() == id)
            {
                *waiting = None;
                let _ = answered.send(());
            }
        }
    });
    let mut input = std::io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let call = serde_json::from_slice::<Envelope<'_>>(&line)
            .ok()
            .filter(|envelope| envelope.method.as_deref() == Some("tools/call"))
            .and_then(|envelope| {
                let params: Params = serde_json::from_str(envelope.params?.get()).ok()?;
                Some((envelope.id?.get().to_owned(), params))
            });
        let passed = match call {
            Some((id, params)) if params.name == "echo" => {
                let input = params.arguments.unwrap_or_default();
                let outcome: Outcome<(), String> =
                    dispatch.call(&ctx, Caller::new("bench"), &tool, &input, || {
                        *waiting
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(id);
                        to_child
                            .write_all(&line)
                            .and_then(|()| to_child.flush())
                            .map_err(|e| e.to_string())?;
                        answer.recv().map_err(|e| e.to_string())
                    });
                outcome.is_done()
            }
            _ => to_child
                .write_all(&line)
                .and_then(|()| to_child.flush())
                .is_ok(),
        };
        if !passed {
            break;
        }
    }
    drop(to_child);
    let _ = up.join();
    let _ = child.wait();
}
