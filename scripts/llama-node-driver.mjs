// Workload driver for @fugood/llama.node (llama.cpp's prebuilt addon): loads a GGUF model
// and generates tokens REPEAT times.
// Usage: [WAIT_FILE=PATH] node llama-node-driver.mjs MODEL [MAX_TOKENS] [THREADS] [REPEAT]
// On the CPU addon (@fugood/node-llama-linux-x64), unless GPU names a variant (vulkan,
// cuda) whose package is installed, with GPU_LAYERS layers offloaded (all by default).
// Each run starts from an empty KV cache and ignores end of sequence. tokens is the
// engine's tokens_predicted: the decode steps after the prompt's, MAX_TOKENS-1 a run (the
// first token comes out of the prompt's evaluation, and the addon does not count it).
// Prints one JSON line: {"pid":…, "tokens":…, "seconds":…, "gpu":…, "timings":…}, where
// timings are the engine's own (prompt_n, prompt_ms, predicted_n, predicted_ms, …) summed
// over the runs. It is the last line of stdout, not the only one: the addon printf()s
// its own "[INFO] …" lines to stdout whatever the log settings.
import {existsSync} from "node:fs";
import {createRequire} from "node:module";
import {initLlama, loadModel} from "@fugood/llama.node";

const [model, maxTokens = "16", threads = "2", repeat = "1"] = process.argv.slice(2);
if (!model) {
    console.error("usage: node llama-node-driver.mjs MODEL [MAX_TOKENS] [THREADS] [REPEAT]");
    process.exit(2);
}

const gpu = process.env.GPU || false;
if (gpu) {
    // llama.node falls back to the CPU addon, with only a warning, when the variant's
    // package is missing: refuse instead of measuring the wrong engine.
    const require = createRequire(import.meta.url);
    try {
        require.resolve(`@fugood/node-llama-${process.platform}-${process.arch}-${gpu}`);
    } catch {
        console.error(`llama-node-driver: no @fugood/node-llama-${process.platform}-${process.arch}-${gpu} package`);
        process.exit(1);
    }
}
const gpuLayers = process.env.GPU_LAYERS === undefined ? 99 : Number(process.env.GPU_LAYERS);
// With WAIT_FILE set, the driver loads the addon, then waits for that file to exist
// before it loads the model (and llama.cpp decodes its warm-up).
await initLlama(gpu || "default");
while (process.env.WAIT_FILE && !existsSync(process.env.WAIT_FILE)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
}
const ctx = await loadModel({
    model, n_ctx: 512, n_threads: Number(threads), n_gpu_layers: gpu ? gpuLayers : 0,
    lib_variant: gpu || "default",
});
const start = performance.now();
let tokens = 0;
const timings = {};
for (let i = 0; i < Number(repeat); i++) {
    ctx.clearCache(); // every run evaluates the whole prompt, none reuses the last one's
    const r = await ctx.completion({prompt: "The quick brown fox", n_predict: Number(maxTokens), ignore_eos: true});
    tokens += r.tokens_predicted;
    for (const [k, v] of Object.entries(r.timings || {})) {
        if (typeof v === "number" && !k.endsWith("_per_token_ms") && !k.endsWith("_per_second")) {
            timings[k] = (timings[k] || 0) + v;
        }
    }
}
const seconds = (performance.now() - start) / 1000;
if (timings.predicted_n > 0) {
    timings.predicted_per_second = timings.predicted_n / (timings.predicted_ms / 1000);
}
await ctx.release();
console.log(JSON.stringify({pid: process.pid, tokens, seconds, gpu, timings}));
