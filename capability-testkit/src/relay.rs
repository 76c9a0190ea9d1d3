//! The benchmarks' baseline for a process between a client and a server: a plain byte relay,
//! the executable of a bench run again with `--relay <command...>` (moved here from
//! `gateway_overhead`, so that `proxy_overhead` measures the same relay).

/// `command` (a relay's server) spawned with pipes, and its pipes; exits 2 without a command.
pub fn spawned(
    command: &[String],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::process::ChildStdout,
) {
    let Some((program, args)) = command.split_first() else {
        std::process::exit(2);
    };
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("relay: {program}: {e}"));
    let (Some(to_child), Some(from_child)) = (child.stdin.take(), child.stdout.take()) else {
        std::process::exit(2);
    };
    (child, to_child, from_child)
}

/// A plain byte relay: spawns `command` and copies standard input to it and its output back,
/// until either side ends; then waits for it.
pub fn relay(command: &[String]) {
    let (mut child, mut to_child, mut from_child) = spawned(command);
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
