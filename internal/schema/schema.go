// Package schema names every span and span attribute profinfer exports: internal/signals
// writes them and every reader (the summary, the Perfetto writer, the DOT writer) looks
// them up here, so that a key is spelled once.
//
// Each constant's comment is its documentation, in a fixed form that schema_test.go
// renders into docs/schema.md (go test ./internal/schema -update rewrites it):
//
//	SpanName: when it is emitted. Parent: its parent.
//	AttrName (type; the spans it is on): what it holds.
//
// [Name] refers to another constant of the package and renders as its value.
//
// Metric names and resource attributes are mdatagen's, from metadata.yaml: the
// generated internal/metadata package names them (metadata.MetricsInfo, the
// ResourceBuilder's setters) and documentation.md describes them. This package holds
// only the keys readers look up that metadata does not name (resource.go, metrics.go),
// tied to the generated code by a test, and the histograms built outside mdatagen.
package schema

// Span names. A step is the span of a scheduler computation of a runtime without
// llama_decode: [SpanWhisperEncode], [SpanWhisperDecode], [SpanOllamaForward] or
// [SpanSchedCompute].
const (
	// SpanRequest: per request, a generation on one sequence, named as the GenAI
	// conventions say: its operation, then the model's name where it is known
	// (text_completion Llama-3.2-1B); linked to the [SpanDecode] spans that computed it.
	// Parent: none, a trace's root.
	SpanRequest = "text_completion"
	// SpanDecode: per llama_decode call, a prefill or decode batch; error status where it
	// returned non-zero. Parent: none, a trace's root.
	SpanDecode = "llama_decode"
	// SpanTranscription: per whisper.cpp transcription (whisper_full_with_state); error
	// status where it returned non-zero. Parent: none, a trace's root.
	SpanTranscription = "whisper.transcription"
	// SpanWhisperEncode: per scheduler computation of whisper.cpp's encoder graphs
	// (conv, encoder, cross), a step. Parent: its [SpanTranscription].
	SpanWhisperEncode = "whisper.encode"
	// SpanWhisperDecode: per scheduler computation of whisper.cpp's decoder, a step.
	// Parent: its [SpanTranscription].
	SpanWhisperDecode = "whisper.decode"
	// SpanOllamaForward: per forward batch of Ollama's own engine (before 0.30), a step.
	// Parent: none, a trace's root.
	SpanOllamaForward = "ollama.forward"
	// SpanSchedCompute: per scheduler computation (ggml_backend_sched_graph_compute_async)
	// of a process whose runtime profinfer does not know, a step. Parent: none, a trace's
	// root.
	SpanSchedCompute = "ggml.backend_sched.graph_compute"
	// SpanSplit: per backend split (ggml_backend_graph_compute_async) inside a
	// [SpanDecode] or a step: on the CPU it holds the CPU graph, on other backends it is
	// the handing over. Parent: the [SpanDecode] or step.
	SpanSplit = "ggml.backend.graph_compute"
	// SpanDevice: per split a device (GPU) computed, from the handing over to the end of
	// the CPU's wait that saw it done; its node events are named by op. Parent: its
	// [SpanSplit].
	SpanDevice = "ggml.device.compute"
	// SpanCopy: per tensor copy between backends (ggml_backend_tensor_copy). Parent: the
	// [SpanDecode] or step.
	SpanCopy = "ggml.backend.tensor_copy"
	// SpanGraph: per CPU graph computation (ggml_graph_compute). Parent: the CPU
	// [SpanSplit] it ran in, on the same thread; else the [SpanDecode] or step; else
	// none, a trace's root (a graph computed outside any step).
	SpanGraph = "ggml.graph_compute"
	// SpanNode: per computed graph node, named by its op where its description was read
	// and ggml.node where not; linked to the nodes whose results it read. Parent: its
	// [SpanGraph].
	SpanNode = "ggml.node"
	// SpanProcess: per traced process that ended while traced (exited, or was killed),
	// from profinfer's attach to its end, with one [EventProcessExit] event; error status
	// where it did not exit with status 0. Parent: none, a trace's root.
	SpanProcess = "profinfer.process"
)

// Span events.
const (
	// EventProcessExit: at a process's end, how it ended as the kernel gave it, on its
	// [SpanProcess].
	EventProcessExit = "process.exit"
)
