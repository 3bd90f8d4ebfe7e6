#!/bin/bash
# A short GPU job under the collector: does its device work show from its first split?
# Starts a collector (COLLECTOR) with every node traced and the file exporter, then one
# job as a user runs it, with no wait for the attach: node-llama-cpp's Vulkan prebuilt on
# lavapipe, every layer of the tiny model offloaded, TOKENS tokens, ggml-vulkan's perf
# logger on. Prints one line: the label, the job's Vulkan splits exported, their
# ggml.device.compute spans, those with the device's node times, ms from the job's start
# to the collector's "attached", and the probes it attached. Run as root after
# `make testenv build`; alternate two builds to compare them:
#
#	for i in 1 2 3 4 5; do COLLECTOR=/tmp/old/bin/otelcol-profinfer scripts/gpu-short-job.sh old; scripts/gpu-short-job.sh new; done
set -euo pipefail
label=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
collector=${COLLECTOR:-$root/bin/otelcol-profinfer}
tokens=${TOKENS:-16}
env=$root/.testenv
out=$(mktemp -d)
trap 'kill -INT $col 2>/dev/null || true; rm -rf "$out"' EXIT
cat >"$out/config.yaml" <<YAML
receivers:
  profinfer:
    nodes: {mode: all}
exporters:
  file: {path: $out/out.jsonl, format: json}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [profinfer], exporters: [file]}
    metrics: {receivers: [profinfer], exporters: [file]}
YAML
"$collector" --config "$out/config.yaml" >"$out/log" 2>&1 &
col=$!
for _ in $(seq 60); do grep -q "Everything is ready" "$out/log" && break; sleep 0.5; done
start=$(date +%s.%N)
env GPU=vulkan MESA_SHADER_CACHE_DIR="$env/mesa-shader-cache" GPU_LAYERS=99 GGML_VK_VISIBLE_DEVICES=0 GGML_VK_PERF_LOGGER=1 \
	node "$env/npm/driver.mjs" "$env/models/tiny-dense.gguf" "$tokens" 2 1 >/dev/null 2>&1
sleep 3
kill -INT $col
wait $col || true
python3 - "$out/out.jsonl" "$out/log" "$start" "$label" <<'PY'
import datetime, json, sys
out, log, start, label = sys.argv[1:]
splits = devices = timed = 0
for line in open(out):
    for rs in json.loads(line).get("resourceSpans", []):
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                a = {x["key"]: x["value"] for x in s.get("attributes", [])}
                if s["name"] == "ggml.backend.graph_compute" and a.get("ggml.backend", {}).get("stringValue") == "VK":
                    splits += 1
                elif s["name"] == "ggml.device.compute":
                    devices += 1
                    timed += int(a.get("ggml.graph.nodes.timed", {}).get("intValue", 0)) > 0
attached, probes = "-", "-"
for l in open(log):
    if "\tattached\t" in l:
        t = datetime.datetime.fromisoformat(l.split()[0].replace("Z", "+00:00")).timestamp()
        if t > float(start):
            attached, probes = "%.0f" % ((t - float(start)) * 1000), json.loads(l[l.index("{"):])["probes"]
            break
print(label, splits, devices, timed, attached, probes)
PY
