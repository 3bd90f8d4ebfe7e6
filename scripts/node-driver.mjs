// Workload driver for the node-llama-cpp prebuilt engine: loads a GGUF model through
// node-llama-cpp's API (CPU only, prebuilt binaries, never a local build) and generates
// tokens. Usage: node driver.mjs MODEL [MAX_TOKENS] [THREADS] [REPEAT]
// Prints one JSON line: {"pid":…, "tokens":…, "seconds":…}.
import {getLlama, LlamaCompletion} from "node-llama-cpp";

const [model, maxTokens = "16", threads = "2", repeat = "1"] = process.argv.slice(2);
if (!model) {
    console.error("usage: node driver.mjs MODEL [MAX_TOKENS] [THREADS] [REPEAT]");
    process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, progressLogs: false, logLevel: "error"});
const loaded = await llama.loadModel({modelPath: model});
const context = await loaded.createContext({contextSize: 512, threads: Number(threads)});
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
console.log(JSON.stringify({pid: process.pid, tokens, seconds}));
await context.dispose();
await loaded.dispose();
await llama.dispose();
