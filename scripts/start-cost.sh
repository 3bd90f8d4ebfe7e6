#!/bin/bash
# What a collector's start costs a model that needs every core: a llama-server decodes
# request after request on 2 threads (--metrics), and each collector given is started
# beside it in turn, ROUNDS times, with the receiver's default configuration
# (internal/overhead/cmd/alwayson/receiver-only.yaml). A start runs from
# the collector's launch until it logs the server's PID as attached (for "base", the same
# executable with no profinfer receiver, until it is ready: the distribution's own share).
# Printed for each: the collector's CPU then (every thread's, from schedstat), the start's
# wall time, and the tokens the server lost: its decodes over the start (llama-server's
# n_decode_total) against its rate over the 8 s before and the 8 s after (the collector
# stopped and settled). Run as root after `make testenv build`:
#
#	ROUNDS=8 scripts/start-cost.sh bin/otelcol-profinfer base
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ $# -gt 0 ] || { echo "usage: $0 COLLECTOR... [base]" >&2; exit 2; }
collectors=()
for c in "$@"; do [ "$c" = base ] && collectors+=(base) || collectors+=("$(realpath "$c")"); done
first=${collectors[0]}
[ "$first" != base ] || { echo "$0: name a collector before base" >&2; exit 2; }

work=$(mktemp -d)
port=8099
.testenv/llama.cpp/bin/llama-server -m .testenv/models/llama-1b-q4_0.gguf -t 2 --port $port -c 2048 --metrics \
  >"$work/server.log" 2>&1 &
server=$!
# setsid: the request loop is a process group of its own, killed whole at the end.
setsid sh -c "while :; do curl -s localhost:$port/completion -d '{\"prompt\":\"Once upon a time\",\"n_predict\":64}' >/dev/null 2>&1; done" </dev/null >/dev/null 2>&1 &
requests=$!
trap 'kill -- -$requests $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do curl -sf localhost:$port/health >/dev/null && break; sleep 0.5; done
sleep 5

cpu_ns() { # PID: CPU time of all its threads
  local ns=0 run _
  for f in /proc/"$1"/task/*/schedstat; do read -r run _ <"$f" && ns=$((ns + run)); done 2>/dev/null
  echo $ns
}
decodes() { curl -s localhost:$port/metrics | awk '/^llamacpp:n_decode_total/ {print $2}'; }
now_ns() { date +%s%N; }
cat >"$work/base.yaml" <<'Y'
receivers: {otlp: {protocols: {grpc: {endpoint: 127.0.0.1:4317}}}}
exporters: {debug: {verbosity: basic}}
service: {pipelines: {traces: {receivers: [otlp], exporters: [debug]}}}
Y
echo "round collector cpu_ms wall_ms tokens_lost (ms_per_token)"
for round in $(seq 1 "${ROUNDS:-6}"); do
  for c in "${collectors[@]}"; do
    dir=$(mktemp -d -p "$work")
    : >"$dir/log"
    d0=$(decodes); t0=$(now_ns); sleep 8; d1=$(decodes); t1=$(now_ns)
    if [ "$c" = base ]; then
      (cd "$dir" && exec "$first" --config "$work/base.yaml") >>"$dir/log" 2>&1 &
      ready='Everything is ready'
    else
      (cd "$dir" && exec "$c" --config "$root/internal/overhead/cmd/alwayson/receiver-only.yaml") >>"$dir/log" 2>&1 &
      ready="\"pid\": $server, \"exe\""
    fi
    pid=$!
    # tail follows the log with inotify: the wait itself takes no CPU worth counting.
    timeout 120 tail -F -n +1 "$dir/log" 2>/dev/null | grep -m1 -q "$ready" || true
    d2=$(decodes); t2=$(now_ns); cpu=$(cpu_ns $pid)
    grep -q "$ready" "$dir/log" || { echo "$round $c: not ready in 120 s"; kill $pid; continue; }
    kill $pid; wait $pid 2>/dev/null || true
    sleep 2
    d3=$(decodes); t3=$(now_ns); sleep 8; d4=$(decodes); t4=$(now_ns)
    awk -v r="$round" -v c="$c" -v cpu="$cpu" \
      -v b="$((d1 - d0))" -v bt="$((t1 - t0))" -v a="$((d4 - d3))" -v at="$((t4 - t3))" \
      -v s="$((d2 - d1))" -v st="$((t2 - t1))" 'BEGIN {
        rate = (b + a) / (bt + at)   # decodes a ns, without a collector
        printf "%s %s %.0f %.0f %.1f (%.1f)\n", r, c, cpu / 1e6, st / 1e6, rate * st - s, 1e-6 / rate }'
  done
done
