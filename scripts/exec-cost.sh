#!/bin/bash
# What other programs' execs cost the collector: each collector given runs idle with the
# receiver's default configuration (internal/overhead/cmd/alwayson/receiver-only.yaml) while
# a loop runs COMMAND (default `curl -s --version`, a dynamic program mapping some 40
# objects) EXECS times (default 600); the collections take turns, ROUNDS times (default
# 4). Printed for each: the loop's wall time, the collector's CPU (every thread's, from
# schedstat) over the loop and 1.5 s after it, less its idle rate measured over 2 s
# before, and that per exec. Run as root after `make build`:
#
#	ROUNDS=4 scripts/exec-cost.sh /tmp/otelcol-before bin/otelcol-profinfer
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ $# -gt 0 ] || { echo "usage: $0 COLLECTOR..." >&2; exit 2; }
command=${COMMAND:-curl -s --version}
execs=${EXECS:-600}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cpu_ns() { # PID: CPU time of all its threads
  local ns=0 run _
  for f in /proc/"$1"/task/*/schedstat; do read -r run _ <"$f" && ns=$((ns + run)); done 2>/dev/null
  echo $ns
}
now_ns() { date +%s%N; }
echo "round collector loop_ms extra_cpu_ms us_per_exec"
for round in $(seq 1 "${ROUNDS:-4}"); do
  for c in "$@"; do
    dir=$(mktemp -d -p "$work")
    exe=$(realpath "$c")
    (cd "$dir" && exec "$exe" --config "$root/internal/overhead/cmd/alwayson/receiver-only.yaml") >"$dir/log" 2>&1 &
    pid=$!
    sleep 4
    c0=$(cpu_ns $pid); t0=$(now_ns); sleep 2; c1=$(cpu_ns $pid); t1=$(now_ns)
    for _ in $(seq 1 "$execs"); do $command >/dev/null; done
    t2=$(now_ns); sleep 1.5; c3=$(cpu_ns $pid); t3=$(now_ns)
    kill -INT $pid; wait $pid 2>/dev/null || true
    awk -v r="$round" -v c="$c" -v n="$execs" -v idle="$((c1 - c0))" -v it="$((t1 - t0))" \
      -v busy="$((c3 - c1))" -v bt="$((t3 - t1))" -v lt="$((t2 - t1))" 'BEGIN {
        extra = busy - idle / it * bt
        printf "%s %s %.0f %.1f %.1f\n", r, c, lt / 1e6, extra / 1e6, extra / n / 1e3 }'
  done
done
