#!/bin/bash
# What ggml-vulkan's perf logger costs a token, and what reading it costs on top: the node
# driver on node-llama-cpp's Vulkan prebuilt over lavapipe (every layer offloaded, 4 runs of
# 64 tokens, 2 threads), four ways in turn, ROUNDS times: A plain; B with
# GGML_VK_PERF_LOGGER=1; C with the logger and a collector (COLLECTOR, the default config)
# attached; D with the collector and no logger. Prints ms a token, one line a round:
# "round A B C D". Run as root after `make testenv build`:
#
#	ROUNDS=8 MODEL=tiny-dense scripts/vulkan-logger-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
collector=${COLLECTOR:-bin/otelcol-profinfer}
model=.testenv/models/${MODEL:-tiny-dense}.gguf
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# run ENV...: the driver's ms a token, with ENV set.
run() {
	env GPU=vulkan GGML_VK_VISIBLE_DEVICES=0 MESA_SHADER_CACHE_DIR="$PWD/.testenv/mesa-shader-cache" "$@" \
		node .testenv/npm/driver.mjs "$model" 64 2 4 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.3f" % (1000*d["seconds"]/d["tokens"]))'
}

# attached ENV...: run, beside a collector started (and settled) before it.
attached() {
	: >"$log"
	"$collector" --config config/otelcol.yaml >"$log" 2>&1 &
	local pid=$!
	until grep -q "Everything is ready" "$log"; do
		kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
		sleep 0.2
	done
	sleep 1
	run "$@"
	kill $pid
	wait $pid 2>/dev/null || true
}

for r in $(seq "${ROUNDS:-8}"); do
	echo "$r $(run) $(run GGML_VK_PERF_LOGGER=1) $(attached GGML_VK_PERF_LOGGER=1) $(attached)"
done
