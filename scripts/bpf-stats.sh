#!/bin/bash
# BPF time per run of the decode and memory-call programs, from the kernel's own
# statistics, under the default config: scripts/bpf-stats.sh [COLLECTOR]
# (default bin/otelcol-profinfer) while llama-bench runs pp512 and tg64 on the 1B model.
set -euo pipefail
cd "$(dirname "$0")/.."
col=${1:-bin/otelcol-profinfer}
go build -o build/bpfstats ./internal/overhead/cmd/bpfstats
cfg=$(mktemp --suffix=.yaml)
out=$(mktemp)
trap 'rm -f "$cfg" "$out"; sysctl -qw kernel.bpf_stats_enabled=0' EXIT
printf 'receivers:\n  profinfer:\nexporters:\n  file:\n    path: %s\nservice:\n  pipelines:\n    traces: {receivers: [profinfer], exporters: [file]}\n' "$out" > "$cfg"
sysctl -qw kernel.bpf_stats_enabled=1
"$col" --config "$cfg" > /dev/null 2>&1 &
pid=$!
sleep 3
.testenv/llama.cpp/bin/llama-bench -m .testenv/models/llama-1b-q4_0.gguf -p 512 -n 64 -t 2 -r 1 > /dev/null 2>&1
build/bpfstats | grep -E "decode_|seq_"
kill -INT "$pid"
wait "$pid" || true
