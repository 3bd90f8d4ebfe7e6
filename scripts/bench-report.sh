#!/usr/bin/env bash
# Measures `profinfer report` on a 1 GB input: the recorded full-tracing file in
# testdata/otlp repeated to SIZE_MB, read as a stream. Prints wall time, throughput and
# peak RSS; the issue's bounds are 50 MB/s and 512 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-1024}
mkdir -p build/bench-report
in=build/bench-report/input.jsonl
bin=build/bench-report/profinfer
go build -o "$bin" ./cmd/profinfer
if [ "$(stat -c %s "$in" 2>/dev/null || echo 0)" -lt $((SIZE_MB << 20)) ]; then
  one=$(mktemp)
  gzip -dc testdata/otlp/llama-1b-full.jsonl.gz >"$one"
  : >"$in"
  while [ "$(stat -c %s "$in")" -lt $((SIZE_MB << 20)) ]; do cat "$one" >>"$in"; done
  rm -f "$one"
fi
size=$(stat -c %s "$in")
/usr/bin/time -f '%e %M' -o build/bench-report/time "$bin" report -o build/bench-report/out "$in" >/dev/null
read -r secs kib <build/bench-report/time
awk -v b="$size" -v s="$secs" -v k="$kib" 'BEGIN {
  printf "input %.0f MB in %.1f s: %.1f MB/s, peak RSS %.0f MiB\n", b/1e6, s, b/1e6/s, k/1024 }'
