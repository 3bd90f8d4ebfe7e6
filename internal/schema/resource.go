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
