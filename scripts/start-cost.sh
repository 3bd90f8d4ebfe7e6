#!/bin/bash
# What a collector's start costs beside a model that needs every core: a llama-server
# decodes request after request on 2 threads; each collector given is started beside it in
# turn, ROUNDS times, and its CPU (every thread's, from schedstat) read when it logs the
# server's PID as attached. "base" runs the same executable with no profinfer receiver, read
# when it is ready: the distribution's own share. Run as root after `make testenv build`:
#
#	scripts/start-cost.sh bin/otelcol-profinfer /tmp/otelcol-before base
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
config=$root/internal/bench/cmd/alwayson/receiver-only.yaml
[ $# -gt 0 ] || { echo "usage: $0 COLLECTOR... [base]" >&2; exit 2; }
collectors=()
for c in "$@"; do [ "$c" = base ] && collectors+=(base) || collectors+=("$(realpath "$c")"); done
first=${collectors[0]}
[ "$first" != base ] || { echo "$0: name a collector before base" >&2; exit 2; }

work=$(mktemp -d)
port=8099
.testenv/llama.cpp/bin/llama-server -m .testenv/models/llama-1b-q4_0.gguf -t 2 --port $port -c 2048 >"$work/server.log" 2>&1 &
server=$!
# setsid: the request loop is a process group of its own, killed whole at the end.
setsid sh -c "while :; do curl -s localhost:$port/completion -d '{\"prompt\":\"Once upon a time\",\"n_predict\":64}' >/dev/null 2>&1; done" </dev/null >/dev/null 2>&1 &
requests=$!
trap 'kill -- -$requests $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do curl -sf localhost:$port/health >/dev/null && break; sleep 0.5; done
sleep 5

cpu_ms() { # PID: CPU time of all its threads, in ms
  local ns=0 run _
  for f in /proc/"$1"/task/*/schedstat; do read -r run _ <"$f" && ns=$((ns + run)); done 2>/dev/null
  echo $((ns / 1000000))
}
cat >"$work/base.yaml" <<'Y'
receivers: {otlp: {protocols: {grpc: {endpoint: 127.0.0.1:4317}}}}
exporters: {debug: {verbosity: basic}}
service: {pipelines: {traces: {receivers: [otlp], exporters: [debug]}}}
Y
for round in $(seq 1 "${ROUNDS:-6}"); do
  for c in "${collectors[@]}"; do
    dir=$(mktemp -d -p "$work")
    if [ "$c" = base ]; then
      (cd "$dir" && exec "$first" --config "$work/base.yaml") >"$dir/log" 2>&1 &
      ready='Everything is ready'
    else
      (cd "$dir" && exec "$c" --config "$config") >"$dir/log" 2>&1 &
      ready="\"pid\": $server, \"exe\""
    fi
    pid=$!
    for _ in $(seq 1 3000); do grep -q "$ready" "$dir/log" && break; sleep 0.005; done
    grep -q "$ready" "$dir/log" && echo "$round $c $(cpu_ms $pid) ms" || echo "$round $c: not ready in 15 s"
    kill $pid; wait $pid 2>/dev/null || true
    sleep 2
  done
done
