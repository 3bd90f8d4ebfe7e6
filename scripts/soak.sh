#!/bin/bash
# Soak test: is the collector's memory bounded over a long run? The distribution runs with
# a configuration (config/otelcol.yaml by default) beside a llama-server on the 1B test
# model under a request loop (one short /completion after another) and a short llama-bench
# run every BENCH_EVERY seconds, each a new process to attach to, report and forget.
# Every SAMPLE_EVERY seconds one CSV row: the collector's RSS, its Go heap (live after the
# latest GC, from GODEBUG=gctrace=1; and the runtime's heap in use from the collector's
# own telemetry on 127.0.0.1:8888 where it serves it), its threads and fds, the receiver's
# dropped counters (from the Prometheus exporter on 127.0.0.1:9464), the requests and bench
# runs done, and the size of the file exporter's output. Every process it starts is
# stopped on exit, however it exits. Run as root after `make testenv build`:
#
#	DURATION=24h scripts/soak.sh
#	DURATION=12m BENCH_EVERY=20 OUT=/tmp/soak scripts/soak.sh
#
# Parameters (environment):
#	DURATION      how long to run: seconds, or with s, m or h (default 30m)
#	BENCH_EVERY   seconds between llama-bench starts (default 120; 0: none)
#	SAMPLE_EVERY  seconds between samples (default 60)
#	CONFIG        the collector's configuration (default config/otelcol.yaml)
#	COLLECTOR     the collector (default bin/otelcol-profinfer)
#	OUT           where the CSV, logs and the file exporter's output go (default a new
#	              directory under /tmp); the collector runs there, so that a relative
#	              file exporter path lands there too
#	THREADS       threads of llama-server and llama-bench (default 2)
#	N_PREDICT     tokens a request generates (default 8)
#	ISOLATE       1: run copies of the llama.cpp tools from $OUT/llama and have the
#	              collector trace those alone (a --config yaml: overlay of receiver
#	              targets), so that other llama.cpp processes on a shared machine (tests)
#	              neither add to what is measured nor are slowed by it. Default 0: the
#	              configuration as it is, which traces every GGML process
#	PPROF         host:port: also save a Go heap profile at each sample, from a collector
#	              built with net/http/pprof serving where $PROFINFER_PPROF says (the
#	              distribution has no pprof extension: build one from
#	              build/otelcol-profinfer with a file that imports net/http/pprof and
#	              listens there). Empty: none
#	MEMPROFILERATE  the heap profile's sampling rate in bytes with PPROF (default 65536)
#
# Output: $OUT/soak.csv, $OUT/collector.log (its log and the gctrace lines), server.log,
# bench.log, fds.txt (the collector's fds by kind at each sample), and heap-SSSSSS.pb.gz
# (SSSSSS: seconds) when PPROF is set.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds() { # 90, 90s, 15m, 2h -> seconds
  case "$1" in
    *h) echo $((${1%h} * 3600)) ;;
    *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}
duration=$(seconds "${DURATION:-30m}")
bench_every=${BENCH_EVERY:-120}
sample_every=${SAMPLE_EVERY:-60}
config=$(realpath "${CONFIG:-config/otelcol.yaml}")
collector=$(realpath "${COLLECTOR:-bin/otelcol-profinfer}")
threads=${THREADS:-2}
n_predict=${N_PREDICT:-8}
out=${OUT:-$(mktemp -d /tmp/soak.XXXXXX)}
mkdir -p "$out"
out=$(realpath "$out")

te=$root/.testenv
model=$te/models/llama-1b-q4_0.gguf
tool() { # the shared build's tool, else the portable (static) one
  if [ -x "$te/llama.cpp/bin/$1" ]; then echo "$te/llama.cpp/bin/$1"; else echo "$te/llama.cpp/portable/$1"; fi
}
server_bin=$(tool llama-server)
bench_bin=$(tool llama-bench)
overlay=()
if [ "${ISOLATE:-0}" = 1 ]; then
  # The whole directory: the shared build finds its libraries beside the executable.
  rm -rf "$out/llama" && cp -a "$(dirname "$server_bin")" "$out/llama"
  server_bin=$out/llama/llama-server
  bench_bin=$out/llama/llama-bench
  overlay=(--config "yaml:receivers::profinfer::targets: [{executable: $server_bin}, {executable: $bench_bin}]")
fi
for f in "$collector" "$server_bin" "$bench_bin" "$model"; do
  [ -e "$f" ] || { echo "$0: $f is missing (make testenv build)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "$0: run as root: the collector loads eBPF programs" >&2; exit 2; }
for p in 9464 9465 8888; do # the configuration's endpoints, and the collector's telemetry
  if (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then
    echo "$0: 127.0.0.1:$p is in use: is another collector running?" >&2
    exit 2
  fi
done

# Every process started here, stopped on exit: the request loop and the bench loop are
# process groups of their own (setsid), stopped whole.
pids=()
groups=()
cleanup() {
  trap - EXIT INT TERM
  for g in "${groups[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$p" 2>/dev/null || true
  done
  for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "soak: output in $out" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$((18000 + RANDOM % 2000))
"$server_bin" -m "$model" -t "$threads" --host 127.0.0.1 --port "$port" -c 1024 -np 1 >"$out/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
  curl -sf "127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "$0: llama-server exited; see $out/server.log" >&2; exit 1; }
  sleep 0.5
done

# The collector comes after the server is up, as it would to a server already running.
godebug=gctrace=1
[ -n "${PPROF:-}" ] && godebug+=,memprofilerate=${MEMPROFILERATE:-65536}
(cd "$out" && GODEBUG=$godebug PROFINFER_PPROF="${PPROF:-}" exec "$collector" --config "$config" "${overlay[@]}") \
  >"$out/collector.log" 2>&1 &
collector_pid=$!
pids+=("$collector_pid")
for _ in $(seq 1 120); do
  grep -q 'Everything is ready' "$out/collector.log" && break
  kill -0 "$collector_pid" 2>/dev/null || { echo "$0: the collector exited; see $out/collector.log" >&2; exit 1; }
  sleep 0.5
done

: >"$out/requests"
setsid bash -c "while :; do curl -s 127.0.0.1:$port/completion -H 'Content-Type: application/json' \
  -d '{\"prompt\":\"Once upon a time\",\"n_predict\":$n_predict,\"cache_prompt\":false}' >/dev/null 2>&1 && echo >>'$out/requests'; done" \
  </dev/null >/dev/null 2>&1 &
groups+=($!)
: >"$out/benches"
if [ "$bench_every" -gt 0 ]; then
  setsid bash -c "while :; do \"$bench_bin\" -m \"$model\" -p 16 -n 16 -r 1 -t $threads >>'$out/bench.log' 2>&1; \
    echo >>'$out/benches'; sleep $bench_every; done" </dev/null >/dev/null 2>&1 &
  groups+=($!)
fi

status() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null; }
# The live heap after the latest GC, MB: gctrace's "A->B->C MB" is C.
gc_heap() { grep -o '[0-9]*->[0-9]*->[0-9]* MB' "$out/collector.log" | tail -1 | sed 's/.*->//; s/ MB//'; }
gcs() { grep -c '^gc [0-9]' "$out/collector.log" || true; }
telemetry() { curl -sf --max-time 5 127.0.0.1:8888/metrics 2>/dev/null | awk -v m="$1" '$1 ~ "^"m"({|$)" {print $2; exit}'; }
prom() { # the receiver's own counter, by its Prometheus name (resource labels vary)
  awk -v m="$1" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}' "$out/prom.txt"
}
lines() { wc -l <"$1" | tr -d ' '; }

echo "elapsed_s,rss_kb,rss_anon_kb,rss_file_kb,rss_shmem_kb,gc_live_heap_mb,heap_alloc_bytes,heap_sys_bytes,threads,fds,events_dropped,spans_dropped,graphs_dropped,gcs,requests,benches,file_bytes" >"$out/soak.csv"
sample() {
  local t=$1
  kill -0 "$collector_pid" 2>/dev/null || { echo "$0: the collector exited; see $out/collector.log" >&2; exit 1; }
  curl -sf --max-time 5 127.0.0.1:9464/metrics >"$out/prom.txt" 2>/dev/null || : >"$out/prom.txt"
  local fds file=0
  fds=$(ls "/proc/$collector_pid/fd" 2>/dev/null | wc -l)
  [ -f "$out/profinfer-output.pb" ] && file=$(stat -c %s "$out/profinfer-output.pb")
  echo "$t,$(status "$collector_pid" VmRSS),$(status "$collector_pid" RssAnon),$(status "$collector_pid" RssFile),$(status "$collector_pid" RssShmem),$(gc_heap),$(telemetry otelcol_process_runtime_heap_alloc_bytes),$(telemetry otelcol_process_runtime_total_sys_memory_bytes),$(status "$collector_pid" Threads),$fds,$(prom profinfer_events_dropped),$(prom profinfer_spans_dropped),$(prom profinfer_graphs_dropped),$(gcs),$(lines "$out/requests"),$(lines "$out/benches"),$file" |
    tee -a "$out/soak.csv"
  { echo "== $t s"; ls -l "/proc/$collector_pid/fd" 2>/dev/null | awk 'NR > 1 {k = $NF; if (k ~ /^\//) k = "file"; sub(/:\[[0-9]*\]$/, "", k); print k}' | sort | uniq -c; } >>"$out/fds.txt"
  if [ -n "${PPROF:-}" ]; then
    curl -sf --max-time 30 "http://$PPROF/debug/pprof/heap" -o "$out/heap-$(printf %06d "$t").pb.gz" || true
  fi
}

start=$SECONDS
sample 0
next=$sample_every
while [ $((SECONDS - start)) -lt "$duration" ]; do
  sleep $((next - (SECONDS - start) > 0 ? next - (SECONDS - start) : 0))
  sample $((SECONDS - start))
  next=$((next + sample_every))
done
