// Workload driver for @fugood/whisper.node (whisper.cpp's prebuilt addon): loads a legacy
// ggml whisper model and transcribes a WAV file REPEAT times.
// Usage: node whisper-driver.mjs MODEL WAV [THREADS] [REPEAT]
// On the CPU addon (@fugood/node-whisper-linux-x64), unless GPU=vulkan picks the Vulkan
// one (@fugood/node-whisper-linux-x64-vulkan); TEMPERATURE_INC sets whisper's temperature
// fallback step (whisper.cpp's default, 0.2, when unset; 0 decodes each window once).
// ggml-vulkan skips CPU-type devices (Mesa's lavapipe) unless GGML_VK_VISIBLE_DEVICES
// names them (=0); without one, whisper.cpp quietly runs on its CPU backend.
// Prints one JSON line on stdout, after the run and the context's release:
// {"pid":…, "seconds":…, "audioSeconds":…, "text":…, "gpu":…, "segments":…}.
// whisper.node never settles the promise of a transcription that failed in whisper.cpp
// (its error callback gets one argument, the promise wants two): node then exits with
// status 13 ("unsettled top-level await") and no JSON line.
import {existsSync, readFileSync} from "node:fs";
import {createRequire} from "node:module";
import {initWhisper} from "@fugood/whisper.node";

const [model, wav, threads = "2", repeat = "1"] = process.argv.slice(2);
if (!model || !wav) {
    console.error("usage: node whisper-driver.mjs MODEL WAV [THREADS] [REPEAT]");
    process.exit(2);
}

const gpu = process.env.GPU || false;
if (gpu) {
    // whisper.node falls back to the CPU addon, with only a warning, when the variant's
    // package is missing: refuse instead of measuring the wrong engine.
    const require = createRequire(import.meta.url);
    try {
        require.resolve(`@fugood/node-whisper-${process.platform}-${process.arch}-${gpu}`);
    } catch {
        console.error(`whisper-driver: no @fugood/node-whisper-${process.platform}-${process.arch}-${gpu} package`);
        process.exit(1);
    }
}

// The duration of the audio, from the WAV header's byte rate and data chunk.
function wavSeconds(path) {
    const b = readFileSync(path);
    const byteRate = b.readUInt32LE(28);
    for (let off = 12; off + 8 <= b.length; off += 8 + b.readUInt32LE(off + 4)) {
        if (b.toString("latin1", off, off + 4) === "data") {
            return b.readUInt32LE(off + 4) / byteRate;
        }
    }
    return null;
}

const ctx = await initWhisper({filePath: model, useGpu: Boolean(gpu)}, gpu || "default");
const options = {language: "en", temperature: 0, maxThreads: Number(threads)};
if (process.env.TEMPERATURE_INC !== undefined) {
    options.temperatureInc = Number(process.env.TEMPERATURE_INC);
}
// A service loads its model, then waits for its first request: with WAIT_FILE set, the
// driver waits for that file to exist before it transcribes.
while (process.env.WAIT_FILE && !existsSync(process.env.WAIT_FILE)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
}
const start = performance.now();
let result;
for (let i = 0; i < Number(repeat); i++) {
    result = await ctx.transcribeFile(wav, options).promise;
}
const seconds = (performance.now() - start) / 1000;
await ctx.release();
console.log(JSON.stringify({
    pid: process.pid, seconds, audioSeconds: wavSeconds(wav), text: result.result, gpu,
    segments: result.segments.length,
}));
