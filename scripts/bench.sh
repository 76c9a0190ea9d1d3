#!/usr/bin/env bash
# Runs every benchmark. Each prints its figures and the ratio to its baseline, measured in the
# same run. Usage: scripts/bench.sh [criterion filter]
#
# The registry bench also prints the cold figure: the first `Registry::from_inventory()` of a
# fresh process, median of CAPABILITY_COLD_RUNS (default 11) child processes.
set -euo pipefail
cd "$(dirname "$0")/.."

# glibc's malloc adapts its mmap and trim thresholds as a program runs; inside criterion that
# can double JSON parse times between samples. Fixing them makes the runs comparable.
export GLIBC_TUNABLES="glibc.malloc.mmap_threshold=4194304:glibc.malloc.trim_threshold=8388608"

cargo bench -p capability-bench -- "$@"
if [ "${SKIP_CEDAR:-0}" != 1 ]; then
  cargo bench --manifest-path benches/cedar/Cargo.toml -- "$@"
fi
