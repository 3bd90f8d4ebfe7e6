package schema

// Resource attributes readers look up. metadata.yaml defines them and the generated
// ResourceBuilder writes them (documentation.md describes them); host.name and
// service.instance.id come from processors downstream. schema_test.go checks these
// against the ResourceBuilder's output.
const (
	// ResourceProcessPID: the process's pid, in the host's namespace.
	ResourceProcessPID = "process.pid"
	// ResourceProcessExecutableName: the executable's base name.
	ResourceProcessExecutableName = "process.executable.name"
	// ResourceProcessExecutablePath: the executable's path, as the process sees it.
	ResourceProcessExecutablePath = "process.executable.path"
	// ResourceServiceName: the executable's base name, unless a processor renamed it.
	ResourceServiceName = "service.name"
	// ResourceGGMLRuntime: llama.cpp, whisper.cpp, ollama or ggml.
	ResourceGGMLRuntime = "ggml.runtime"
	// ResourceGGMLBackendsLoaded: the backends besides the CPU's the process loaded.
	ResourceGGMLBackendsLoaded = "ggml.backends.loaded"
	// ResourceGGMLDeviceSoftware: the software driver a backend's device runs on, in the
	// process's own threads on the host's CPUs (lavapipe).
	ResourceGGMLDeviceSoftware = "ggml.device.software"
	// ResourceGGMLVersion: ggml_version(), where the release has it.
	ResourceGGMLVersion = "ggml.version"
	// ResourceGGMLCPUVariant: the CPU backend's variant (haswell, …), from its library.
	ResourceGGMLCPUVariant = "ggml.cpu.variant"
	// ResourceGGMLCPUSIMD: the SIMD the CPU backend was compiled for (sse2, avx2,
	// avx512_vnni, neon, …), read from its code; on the scale of internal/simd.
	ResourceGGMLCPUSIMD = "ggml.cpu.simd"
	// ResourceHostCPUSIMD: the widest SIMD of the CPU it runs on, on the same scale, from
	// /proc/cpuinfo.
	ResourceHostCPUSIMD = "host.cpu.simd"
	// ResourceProcessExecutableBuildID: the executable's GNU build id.
	ResourceProcessExecutableBuildID = "process.executable.build_id.gnu"
	// ResourceContainerID: the container the process runs in.
	ResourceContainerID = "container.id"
	// ResourceOSVersion: the kernel release.
	ResourceOSVersion = "os.version"
	// ResourceLlamaBuildNumber: llama.cpp's build number (LLAMA_BUILD_NUMBER).
	ResourceLlamaBuildNumber = "llama.build.number"
	// ResourceLlamaBuildCommit: llama.cpp's commit (LLAMA_COMMIT).
	ResourceLlamaBuildCommit = "llama.build.commit"
	// ResourceLlamaContextSize: the first llama_context's n_ctx, of those profinfer read
	// (the one live at attach, or the first made after); each [SpanDecode] carries its
	// own context's. A process may make several (llama-bench one per test).
	ResourceLlamaContextSize = LlamaContextSize
	// ResourceLlamaContextThreads: the first llama_context's n_threads.
	ResourceLlamaContextThreads = "llama.context.threads"
	// ResourceLlamaContextBatchSize: the first llama_context's n_batch.
	ResourceLlamaContextBatchSize = LlamaContextBatchSize
	// ResourceLlamaContextUbatchSize: the first llama_context's n_ubatch.
	ResourceLlamaContextUbatchSize = LlamaContextUbatchSize
	// ResourceLlamaModelArchitecture: the model's GGUF general.architecture.
	ResourceLlamaModelArchitecture = "llama.model.architecture"
	// ResourceLlamaModelParameters: the model's parameters.
	ResourceLlamaModelParameters = "llama.model.parameters"
	// ResourceLlamaModelFileType: the model file's weights' type (Q4_0, F16, …).
	ResourceLlamaModelFileType = "llama.model.file_type"
	// ResourceLlamaModelName: the model's GGUF general.name.
	ResourceLlamaModelName = "llama.model.name"
	// ResourceLlamaModelPath: the model file's path.
	ResourceLlamaModelPath = "llama.model.path"
	// ResourceWhisperModelType: a whisper.cpp model's size (tiny, base, …).
	ResourceWhisperModelType = "whisper.model.type"
	// ResourceWhisperModelFileType: a whisper.cpp model's weights' type.
	ResourceWhisperModelFileType = "whisper.model.file_type"
	// ResourceHostName: the host, where a resource detector added it.
	ResourceHostName = "host.name"
	// ResourceServiceInstanceID: the collector instance, where a processor added it.
	ResourceServiceInstanceID = "service.instance.id"
)
