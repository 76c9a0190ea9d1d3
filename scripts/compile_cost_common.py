"""What the compile-cost scripts share: a scratch workspace of generated crates with their
dependencies prebuilt, timing a command, and the median of repeated measurements."""

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, cwd, env=None) -> float:
    """Runs `cmd`; its wall time in seconds. Exits with its stderr if it fails."""
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stderr}")
    return elapsed


def median_of(runs: int, prepare, measure) -> float:
    """The median of `runs` measurements, each after `prepare()`."""
    samples = []
    for _ in range(runs):
        prepare()
        samples.append(measure())
    return statistics.median(samples)


def workspace(work: Path, crates: dict) -> tuple:
    """A fresh workspace in `work` whose members are `crates` (name -> function writing the
    crate into the directory it is given), with this repository's Cargo.lock. Returns the
    environment and the cargo to build it with (its own target dir, no RUSTFLAGS)."""
    for name in crates:
        shutil.rmtree(work / name, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    members = ", ".join(f'"{name}"' for name in sorted(crates))
    (work / "Cargo.toml").write_text(f'[workspace]\nmembers = [{members}]\nresolver = "3"\n')
    for name, write in crates.items():
        write(work / name)
    lock = ROOT / "Cargo.lock"
    if lock.exists():
        shutil.copy(lock, work / "Cargo.lock")
    env = dict(os.environ, CARGO_TARGET_DIR=str(work / "target"))
    env.pop("RUSTFLAGS", None)
    return env, os.environ.get("CARGO", "cargo")


def touch_rebuild(runs: int, work: Path, crate: str, env, cargo) -> float:
    """The median time to rebuild `crate` after touching its `src/lib.rs`."""
    src = work / crate / "src" / "lib.rs"
    build = [cargo, "build", "--offline", "-p", crate]
    return median_of(runs, lambda: os.utime(src), lambda: run(build, cwd=work, env=env))
