#!/bin/bash
# Alternating A/B: plain llama-bench tg32 vs the same under the collector (default config, file exporter).
cd "$(dirname "$0")/.."
B=.testenv/llama.cpp/bin/llama-bench; M=.testenv/models/llama-1b-q4_0.gguf
tg() { $B -m $M -t 2 -p 0 -n 32 -r 2 -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])'; }
cat > /tmp/col.yaml <<Y
receivers: {profinfer: {}}
exporters: {file: {path: /tmp/col-out.jsonl}}
service: {telemetry: {metrics: {level: none}}, pipelines: {traces: {receivers: [profinfer], exporters: [file]}, metrics: {receivers: [profinfer], exporters: [file]}}}
Y
for i in $(seq 1 ${PAIRS:-6}); do
  a=$(tg)
  bin/otelcol-profinfer --config /tmp/col.yaml >/tmp/col.log 2>&1 & c=$!; sleep 1
  b=$(tg)
  kill $c; wait $c 2>/dev/null; rm -f /tmp/col-out.jsonl
  echo "$a $b"
done
