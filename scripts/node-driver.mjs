// Workload driver for the node-llama-cpp prebuilt engine: loads a GGUF model through
// node-llama-cpp's API (prebuilt binaries, never a local build) and generates tokens.
// Usage: [WAIT_FILE=PATH [WAIT_AT=load]] node driver.mjs MODEL [MAX_TOKENS] [THREADS] [REPEAT]
// On the CPU backend, unless GPU names one (vulkan), with GPU_LAYERS layers offloaded
// (all by default). Prints one JSON line: {"pid":…, "tokens":…, "seconds":…, "gpu":…}.
import {existsSync} from "node:fs";
import {getLlama, LlamaCompletion} from "node-llama-cpp";

const [model, maxTokens = "16", threads = "2", repeat = "1"] = process.argv.slice(2);
if (!model) {
    console.error("usage: node driver.mjs MODEL [MAX_TOKENS] [THREADS] [REPEAT]");
    process.exit(2);
}

const gpu = process.env.GPU || false;
const llama = await getLlama({gpu, build: "never", usePrebuiltBinaries: true, progressLogs: false, logLevel: "error"});
const gpuLayers = process.env.GPU_LAYERS === undefined ? "max" : Number(process.env.GPU_LAYERS);
// With WAIT_FILE set, the driver waits for that file to exist before it generates, its
// model loaded: a profiler told to go on then sees every decode from its start. With
// WAIT_AT=load it waits before it loads the model, which makes the GPU device.
const gate = async (at) => {
    while (process.env.WAIT_FILE && (process.env.WAIT_AT || "generate") === at && !existsSync(process.env.WAIT_FILE)) {
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
};
await gate("load");
const loaded = await llama.loadModel({modelPath: model, gpuLayers: gpu ? gpuLayers : 0});
const context = await loaded.createContext({contextSize: 512, threads: Number(threads)});
await gate("generate");
const start = performance.now();
let tokens = 0;
for (let i = 0; i < Number(repeat); i++) {
    const sequence = context.getSequence();
    const completion = new LlamaCompletion({contextSequence: sequence});
    await completion.generateCompletion("The quick brown fox", {
        maxTokens: Number(maxTokens),
        onToken: (t) => { tokens += t.length; },
    });
    sequence.dispose();
}
const seconds = (performance.now() - start) / 1000;
console.log(JSON.stringify({pid: process.pid, tokens, seconds, gpu: llama.gpu}));
await context.dispose();
await loaded.dispose();
await llama.dispose();
