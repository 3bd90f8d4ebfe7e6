package schema

// On every span that runs on a thread.
const (
	// ThreadID (int; [SpanDecode], [SpanTranscription], steps, [SpanSplit], [SpanDevice],
	// [SpanCopy], [SpanGraph]): the thread that made the call, in the host's PID
	// namespace. Node spans have none.
	ThreadID = "thread.id"
)

// Requests: the GenAI semantic conventions (v1.38.0) and llama.cpp's own.
const (
	// GenAIOperationName (string; [SpanRequest]): text_completion, whatever API the
	// server put around it.
	GenAIOperationName = "gen_ai.operation.name"
	// GenAIProviderName (string; [SpanRequest]): llama.cpp.
	GenAIProviderName = "gen_ai.provider.name"
	// GenAIRequestModel (string; [SpanRequest]): the model's GGUF general.name, where
	// the model file was read.
	GenAIRequestModel = "gen_ai.request.model"
	// GenAIUsageInputTokens (int; [SpanRequest]): prompt tokens, computed and cached
	// together.
	GenAIUsageInputTokens = "gen_ai.usage.input_tokens"
	// GenAIUsageCacheReadInputTokens (int; [SpanRequest]): prompt tokens already in the
	// cache.
	GenAIUsageCacheReadInputTokens = "gen_ai.usage.cache_read.input_tokens"
	// GenAIUsageOutputTokens (int; [SpanRequest]): tokens generated.
	GenAIUsageOutputTokens = "gen_ai.usage.output_tokens"
	// LlamaSeqID (int; [SpanRequest]): the sequence the request ran on.
	LlamaSeqID = "llama.seq_id"
	// LlamaRequestWarmup (bool; [SpanRequest]): true for llama.cpp's warm-up at load,
	// which no client asked for; absent otherwise.
	LlamaRequestWarmup = "llama.request.warmup"
	// LlamaRequestPromptTokens (int; [SpanRequest]): prompt tokens computed, not cached.
	LlamaRequestPromptTokens = "llama.request.prompt_tokens"
	// LlamaRequestPromptPrefixHash (int; [SpanRequest]): a hash of its prompt's first 64
	// tokens and their positions, where it computed them all (none came from the cache);
	// absent otherwise. Two requests with the same computed the same prompt start.
	LlamaRequestPromptPrefixHash = "llama.request.prompt.prefix_hash"
	// LlamaRequestWait (double; [SpanRequest]): seconds from its arrival (the first bytes
	// its connection received after the server last answered on it) to its first
	// decode's start: its wait for a slot, and the server's reading of it; absent where
	// its arrival was not seen (the connections layer off, or not a server).
	LlamaRequestWait = "llama.request.wait"
	// LlamaRequestQueued (bool; [SpanRequest]): true where the request before it on its
	// sequence was still computing when it arrived: it waited for that slot to free, as
	// a server with every slot busy defers a request; absent otherwise.
	LlamaRequestQueued = "llama.request.queued"
	// LlamaRequestTimeToFirstToken (double; [SpanRequest]): seconds from its first
	// decode's start to the end of the decode that computed its first output token;
	// absent without output.
	LlamaRequestTimeToFirstToken = "llama.request.time_to_first_token"
	// LlamaRequestTimePerOutputToken (double; [SpanRequest]): mean seconds per output
	// token after the first; absent under two outputs.
	LlamaRequestTimePerOutputToken = "llama.request.time_per_output_token"
	// LlamaRequestTimePerOutputTokenMax (double; [SpanRequest]): the longest gap between
	// output tokens after the first, seconds; absent under two outputs.
	LlamaRequestTimePerOutputTokenMax = "llama.request.time_per_output_token.max"
	// LlamaRequestTimePerOutputTokenMedian (double; [SpanRequest]): the median gap between
	// output tokens after the first, seconds, to within 9%; absent under two outputs.
	LlamaRequestTimePerOutputTokenMedian = "llama.request.time_per_output_token.median"
	// LlamaRequestGapMaxPromptTokens (int; [SpanRequest]): prompt tokens of other
	// requests its llama_context computed in its longest gap: what filled it; absent
	// under two outputs.
	LlamaRequestGapMaxPromptTokens = "llama.request.time_per_output_token.max.prompt_tokens"
	// LlamaRequestTimePrefix (double; [SpanRequest]): the prefix of seven attributes,
	// LlamaRequestTimePrefix + a share's name, that say where its time went from its
	// first decode's start to its last decode's end, in seconds, adding up to its span:
	// prompt (decodes computing its prompt), alone (its next token alone in a decode),
	// batched (beside other sequences' next tokens), mixed (beside other requests'
	// prompts), other_prompts and other_decodes (its llama_context's decodes that did not
	// carry it, computing others' prompts or next tokens), between (between its
	// context's decodes: the server sampling, applying a grammar, sending, reading).
	// With [LlamaRequestWait], its latency.
	LlamaRequestTimePrefix = "llama.request.time."
	// LlamaRequestPromptStall (double; [SpanRequest]): seconds its generation waited for
	// other requests' prompts: its context's decodes that computed them while it
	// generated, with its next token (mixed) or without it (other_prompts), less its
	// median pace for the tokens they gave it; absent under two outputs.
	LlamaRequestPromptStall = "llama.request.prompt_stall"
	// LlamaRequestKVCells (int; [SpanRequest]): the most KV cells its sequence held.
	LlamaRequestKVCells = "llama.request.kv_cells"
	// LlamaRequestContextFull (bool; [SpanRequest]): true where its sequence reached the
	// cells one sequence may hold ([LlamaContextSeqSize]), where a server stops a
	// generation (llama-server's truncated) or shifts its context; absent otherwise.
	LlamaRequestContextFull = "llama.request.context.full"
	// LlamaRequestContextShifts (int; [SpanRequest]): context shifts of its sequence while
	// it ran (a span of it removed, the rest moved down); absent where none.
	LlamaRequestContextShifts = "llama.request.context.shifts"
	// LlamaRequestDecodes (int; [SpanRequest]): the decodes that carried it.
	LlamaRequestDecodes = "llama.request.decodes"
	// LlamaRequestSharedSequencesMax (int; [SpanRequest]): the most other sequences a
	// decode of it carried.
	LlamaRequestSharedSequencesMax = "llama.request.shared_sequences.max"
	// LlamaRequestSharedSequencesMean (double; [SpanRequest]): the other sequences its
	// decodes carried, on average.
	LlamaRequestSharedSequencesMean = "llama.request.shared_sequences.mean"
	// LlamaRequestEnd (string; [SpanRequest]): why it ended: rewound, cleared, idle,
	// exited, stopped or evicted.
	LlamaRequestEnd = "llama.request.end"
)

// llama_decode and its batch.
const (
	// LlamaBatchTokens (int; [SpanDecode]): tokens in the batch.
	LlamaBatchTokens = "llama.batch.tokens"
	// LlamaPhase (string; [SpanDecode]): what its sequences did: prefill (each computed
	// a prompt, or a chunk of one), decode (each added its next token: one token, or a
	// draft verified with it), mixed (a prompt's chunk beside other sequences' next
	// tokens, as a server computes a new request's prompt beside its generating slots).
	LlamaPhase = "llama.phase"
	// LlamaBatchPromptSequences (int; [SpanDecode]): the sequences of the batch
	// computing a prompt (or a chunk of one).
	LlamaBatchPromptSequences = "llama.batch.prompt.sequences"
	// LlamaBatchPromptTokens (int; [SpanDecode]): their tokens.
	LlamaBatchPromptTokens = "llama.batch.prompt.tokens"
	// LlamaBatchNextSequences (int; [SpanDecode]): the sequences of the batch adding
	// their next token (a decode step's width).
	LlamaBatchNextSequences = "llama.batch.next.sequences"
	// LlamaBatchNextTokens (int; [SpanDecode]): their tokens: one each, more where a
	// draft is verified.
	LlamaBatchNextTokens = "llama.batch.next.tokens"
	// LlamaKVCells (int; [SpanDecode]): the KV cells its llama_context's sequences held
	// after it, summed (positions up to the highest each reached, less those removed).
	LlamaKVCells = "llama.kv.cells"
	// LlamaKVSeqCellsMax (int; [SpanDecode]): the most one of them held.
	LlamaKVSeqCellsMax = "llama.kv.seq_cells.max"
	// LlamaDecodeResult (int; [SpanDecode]): llama_decode's return value.
	LlamaDecodeResult = "llama.decode.result"
	// LlamaBatchSeqIDs (int[]; [SpanDecode]): the sequences the batch carried.
	LlamaBatchSeqIDs = "llama.batch.seq_ids"
	// LlamaBatchSeqTokens (int[]; [SpanDecode]): tokens of each of those sequences, in
	// their order.
	LlamaBatchSeqTokens = "llama.batch.seq_tokens"
	// LlamaBatchImplicitSeq (bool; [SpanDecode], [SpanRequest]): true where the batch
	// named no sequence (llama_batch_get_one) and sequence 0 is assumed.
	LlamaBatchImplicitSeq = "llama.batch.implicit_seq"
	// LlamaBatchPartial (bool; [SpanDecode]): true where the batch had more sequences,
	// or more tokens, than the probe sums: [LlamaBatchSeqTokens] is short.
	LlamaBatchPartial = "llama.batch.partial"
)

// The llama_context a llama_decode computed with, read once per context: a process may
// make several (llama-bench one per test), each with its own. Absent where the context
// was not read (freed first, or a release without the getters); the batch sizes where
// the release has no getters for them.
const (
	// LlamaContextSize (int; [SpanDecode]): its context's n_ctx.
	LlamaContextSize = "llama.context.size"
	// LlamaContextBatchSize (int; [SpanDecode]): its context's n_batch.
	LlamaContextBatchSize = "llama.context.batch_size"
	// LlamaContextUbatchSize (int; [SpanDecode]): its context's n_ubatch.
	LlamaContextUbatchSize = "llama.context.ubatch_size"
	// LlamaContextSeqSize (int; [SpanDecode]): its context's n_ctx_seq, the cells one
	// sequence may hold: n_ctx with one sequence or a unified KV cache, else its share.
	LlamaContextSeqSize = "llama.context.seq_size"
	// LlamaContextSequences (int; [SpanDecode]): its context's n_seq_max, the sequences
	// (a server's slots) it computes at once.
	LlamaContextSequences = "llama.context.sequences"
)

// whisper.cpp's transcriptions.
const (
	// WhisperAudioSeconds (double; [SpanTranscription]): the audio given, seconds.
	WhisperAudioSeconds = "whisper.audio.seconds"
	// WhisperRealTimeFactor (double; [SpanTranscription]): its time over the audio's;
	// absent without audio.
	WhisperRealTimeFactor = "whisper.real_time_factor"
	// WhisperEncodePasses (int; [SpanTranscription]): its [SpanWhisperEncode] steps.
	WhisperEncodePasses = "whisper.encode.passes"
	// WhisperEncodeSeconds (double; [SpanTranscription]): their time.
	WhisperEncodeSeconds = "whisper.encode.seconds"
	// WhisperDecodePasses (int; [SpanTranscription]): its [SpanWhisperDecode] steps.
	WhisperDecodePasses = "whisper.decode.passes"
	// WhisperDecodeSeconds (double; [SpanTranscription]): their time.
	WhisperDecodeSeconds = "whisper.decode.seconds"
	// ProfinferRecordsLost (bool; [SpanTranscription]): true where records of it were
	// lost, so that its steps may be missing.
	ProfinferRecordsLost = "profinfer.records_lost"
)

// A process's end.
const (
	// ProcessExitCode (int; [EventProcessExit]): its exit status, where it exited;
	// absent where a signal killed it.
	ProcessExitCode = "process.exit.code"
	// ProfinferExitSignal (string; [EventProcessExit]): the signal that killed it
	// (SIGKILL, …); absent where it exited.
	ProfinferExitSignal = "profinfer.exit.signal"
	// ProfinferExitCoreDumped (bool; [EventProcessExit]): true where the signal dumped
	// core.
	ProfinferExitCoreDumped = "profinfer.exit.core_dumped"
	// ProfinferExitOOMKiller (string; [EventProcessExit]): where the kernel's OOM killer
	// chose it: cgroup (its memory cgroup met its limit), system (the machine ran out of
	// memory) or unknown (its memory cgroups could not be read); absent where it did not.
	ProfinferExitOOMKiller = "profinfer.exit.oom_killer"
	// ProfinferExitCgroup (string; [EventProcessExit]): the memory cgroup whose limit it
	// met, as /proc/PID/cgroup names it; with the cgroup OOM killer.
	ProfinferExitCgroup = "profinfer.exit.cgroup"
	// ProfinferExitMemoryLimit (int; [EventProcessExit]): that cgroup's memory limit,
	// bytes.
	ProfinferExitMemoryLimit = "profinfer.exit.memory.limit"
	// ProfinferExitMemoryUsage (int; [EventProcessExit]): its memory usage as the process
	// ended, bytes, which the process's end may already have freed.
	ProfinferExitMemoryUsage = "profinfer.exit.memory.usage"
	// ProfinferExitMemoryPeak (int; [EventProcessExit]): its peak memory usage, bytes;
	// absent where the kernel keeps none.
	ProfinferExitMemoryPeak = "profinfer.exit.memory.peak"
	// ProfinferExitCause (string; [EventProcessExit]): all of that in words, as the
	// span's status says it.
	ProfinferExitCause = "profinfer.exit.cause"
	// ProfinferExitGraphs (int; [EventProcessExit]): CPU graphs it computed while traced,
	// finished or cut.
	ProfinferExitGraphs = "profinfer.exit.graphs"
	// ProfinferExitSteps (int; [EventProcessExit]): steps (llama_decode calls, …) it
	// finished while traced.
	ProfinferExitSteps = "profinfer.exit.steps"
	// ProfinferCut (bool; [SpanDecode], steps, [SpanGraph]): true where the process ended
	// inside it: its end is the process's, and it holds what was computed by then.
	ProfinferCut = "profinfer.cut"
)

// Steps.
const (
	// GGMLPhase (string; steps, and [SpanSplit], [SpanCopy], [SpanGraph] in them): the
	// phase the runtime folds the step into: prefill, decode, encode or compute. A
	// [SpanDecode]'s descendants have none: its [LlamaPhase] is theirs.
	GGMLPhase = "ggml.phase"
	// GGMLStepStage (string; steps): which of the runtime's graphs it computed (whisper:
	// conv, encoder, cross).
	GGMLStepStage = "ggml.step.stage"
	// GGMLStepTokens (int; steps): the rows its first node gets, where it gets rows: an
	// Ollama batch's tokens.
	GGMLStepTokens = "ggml.step.tokens"
	// GGMLSchedBackends (int; steps): the backends of its scheduler.
	GGMLSchedBackends = "ggml.sched.backends"
	// GGMLStepFirstNode (string; [SpanSchedCompute]): its graph's first node, op and
	// tensor name: what tells computations of an unknown runtime apart.
	GGMLStepFirstNode = "ggml.step.first_node"
)

// Backends: splits, device work and copies.
const (
	// GGMLBackend (string; [SpanSplit], [SpanDevice], [SpanGraph]): the backend that
	// computed it (CPU, Vulkan, RPC, …).
	GGMLBackend = "ggml.backend"
	// GGMLGraphNodes (int; steps, [SpanSplit], [SpanDevice], [SpanGraph]): nodes in the
	// graph computed.
	GGMLGraphNodes = "ggml.graph.nodes"
	// GGMLDeviceWaitNS (int; [SpanDevice]): how long the CPU's wait for the device
	// blocked, ns.
	GGMLDeviceWaitNS = "ggml.device.wait_ns"
	// GGMLDeviceEndBound (bool; [SpanDevice]): true where the span's end only bounds the
	// work's: the CPU hardly waited, or waited for a later split.
	GGMLDeviceEndBound = "ggml.device.end_bound"
	// GGMLGraphNodesTimed (int; [SpanDevice]): nodes the device timed itself (its
	// backend's logger on).
	GGMLGraphNodesTimed = "ggml.graph.nodes.timed"
	// GGMLDeviceTimedNS (int; [SpanDevice]): the sum of those nodes' device times, ns,
	// which the span's extent bounds.
	GGMLDeviceTimedNS = "ggml.device.timed_ns"
	// GGMLGraphNodesDescribed (int; [SpanDevice]): nodes read from the split's graph at
	// the handing over, in a sampling window, untimed: its events.
	GGMLGraphNodesDescribed = "ggml.graph.nodes.described"
	// GGMLDeviceLabel (string; [SpanDevice] events): what the backend filed a timed
	// node's time under (ggml-vulkan: op, types, shape, fusion).
	GGMLDeviceLabel = "ggml.device.label"
	// GGMLDeviceNodeNS (int; [SpanDevice] events): the device's own time for the node,
	// ns, where it came.
	GGMLDeviceNodeNS = "ggml.device.node_ns"
	// GGMLBackendSource (string; [SpanCopy]): the backend of the source buffer.
	GGMLBackendSource = "ggml.backend.source"
	// GGMLBackendDestination (string; [SpanCopy]): the backend of the destination buffer.
	GGMLBackendDestination = "ggml.backend.destination"
	// GGMLCopyBytes (int; [SpanCopy]): bytes copied.
	GGMLCopyBytes = "ggml.copy.bytes"
	// GGMLCopyQueued (bool; [SpanCopy]): true where a device queued the copy with its
	// work: the span is the CPU's share, the transfer runs on the device after.
	GGMLCopyQueued = "ggml.copy.queued"
)

// CPU graphs.
const (
	// GGMLGraphTraced (bool; [SpanGraph]): whether node probes covered the whole graph;
	// only a traced graph has node spans.
	GGMLGraphTraced = "ggml.graph.traced"
	// GGMLGraphNodesComputed (int; [SpanGraph]): nodes computed, where traced.
	GGMLGraphNodesComputed = "ggml.graph.nodes.computed"
	// GGMLThreads (int; [SpanGraph], [SpanNode]): threads the graph was computed with.
	GGMLThreads = "ggml.threads"
	// GGMLGraphOnCPUNS (int; [SpanGraph]): its threads' time on a CPU during the graph,
	// summed, ns, where it was read at both ends: every prompt's graph and every graph of
	// a sampling window, a one-token decode's at most every 50 ms.
	GGMLGraphOnCPUNS = "ggml.graph.on_cpu_ns"
	// GGMLGraphRunqueueNS (int; [SpanGraph]): their time runnable, waiting for a CPU, ns.
	GGMLGraphRunqueueNS = "ggml.graph.runqueue_ns"
	// GGMLGraphMajorFaults (int; [SpanGraph]): the major page faults its process's
	// threads took during the graph: each a wait for the disk.
	GGMLGraphMajorFaults = "ggml.graph.major_faults"
	// GGMLGraphKVCells (int; [SpanGraph]): the KV cells a query of the graph's attention
	// reads at most: its decode's last position + 1 (a one-token decode's depth in the
	// cache); absent where the batch does not say its positions.
	GGMLGraphKVCells = "ggml.graph.kv_cells"
	// GGMLGraphOnCPUShare (double; [SpanGraph]): on-CPU time over threads × wall time,
	// at most 1.
	GGMLGraphOnCPUShare = "ggml.graph.on_cpu_share"
	// GGMLGraphOnCPUPerturbed (bool; [SpanGraph]): true where the graph ran while the
	// collector itself was busy: its share says as much about profinfer as the machine.
	GGMLGraphOnCPUPerturbed = "ggml.graph.on_cpu_perturbed"
	// GGMLGraphFirst (bool; [SpanGraph]): true on the first graph a new backend scheduler
	// computed (a new llama_context's, profinfer there when it was made): its first touches
	// of the weights and of the context's buffers (page faults, and on a virtual machine
	// the host's) make it no measure of the later ones: llama-bench's warm-up, a server's
	// warm-up run.
	GGMLGraphFirst = "ggml.graph.first"
	// GGMLCriticalPathDurationNS (int; [SpanGraph]): the length of the graph's critical
	// path through its nodes' dependencies, ns, with node spans.
	GGMLCriticalPathDurationNS = "ggml.critical_path.duration_ns"
	// GGMLCriticalPathShare (double; [SpanGraph]): that over the graph's time.
	GGMLCriticalPathShare = "ggml.critical_path.share"
	// GGMLCriticalPathNodes (int; [SpanGraph]): nodes on the critical path.
	GGMLCriticalPathNodes = "ggml.critical_path.nodes"
)

// Nodes, and what their description says.
const (
	// GGMLOp (string; [SpanNode], [SpanDevice] events): the node's op (MUL_MAT, ADD, …).
	GGMLOp = "ggml.op"
	// GGMLTensorName (string; [SpanNode], [SpanDevice] events, [SpanCopy]): the tensor's
	// name (a copy's: its source's).
	GGMLTensorName = "ggml.tensor.name"
	// GGMLTensorType (string; [SpanNode], [SpanDevice] events): the type of the tensor
	// the node writes (f32, …).
	GGMLTensorType = "ggml.tensor.type"
	// GGMLWeightType (string; [SpanNode], [SpanDevice] events): the type of the matrix a
	// matmul or row read reads its rows from, the weights' quantisation; absent for
	// other ops.
	GGMLWeightType = "ggml.weight.type"
	// GGMLTensorShape (int[]; [SpanNode], [SpanDevice] events): the tensor's dimensions.
	GGMLTensorShape = "ggml.tensor.shape"
	// GGMLLayer (int; [SpanNode], [SpanDevice] events): the layer in the tensor's name
	// (Qcur-12, cache_k_l4); absent where it names none.
	GGMLLayer = "ggml.layer"
	// GGMLSrc (string[]; [SpanNode], [SpanDevice] events): the node's sources, each its
	// type and shape (q4_0[2048 2048 1 1]).
	GGMLSrc = "ggml.src"
	// GGMLFusedOp (string; [SpanNode], [SpanDevice] events): the op a fused kernel
	// computed with the node's (RMS_NORM with MUL).
	GGMLFusedOp = "ggml.fused.op"
	// GGMLThreadBusyNS (int[]; [SpanNode]): each worker thread's time computing the node
	// before its closing barrier, ns, by ith; with the barrier probe on.
	GGMLThreadBusyNS = "ggml.thread.busy_ns"
	// GGMLBarrierWaitNS (int; [SpanNode]): the threads' wait in the closing barrier for
	// the slowest, summed, ns; with the barrier probe on.
	GGMLBarrierWaitNS = "ggml.barrier.wait_ns"
	// GGMLCriticalPath (bool; [SpanNode]): true on the nodes of the graph's critical path.
	GGMLCriticalPath = "ggml.critical_path"
	// GGMLFlops (double; [SpanNode]): floating-point operations the node computes, where
	// its op has a model.
	GGMLFlops = "ggml.flops"
	// GGMLBytes (double; [SpanNode]): bytes it reads and writes, likewise.
	GGMLBytes = "ggml.bytes"
)

// The scheduler's doings to a node's threads; each absent where zero.
const (
	// GGMLSchedOffCPUNS (int; [SpanNode]): time the threads were off a CPU, ns.
	GGMLSchedOffCPUNS = "ggml.sched.off_cpu_ns"
	// GGMLSchedRunqueueNS (int; [SpanNode]): time they were runnable, waiting for a CPU, ns.
	GGMLSchedRunqueueNS = "ggml.sched.runqueue_ns"
	// GGMLSchedPreemptions (int; [SpanNode]): times they were preempted.
	GGMLSchedPreemptions = "ggml.sched.preemptions"
	// GGMLSchedMigrations (int; [SpanNode]): times they moved to another CPU.
	GGMLSchedMigrations = "ggml.sched.migrations"
)

// The roofline, where peaks are known.
const (
	// GGMLRooflineBound (string; [SpanNode]): memory or compute; overhead or unexplained
	// under 10% of its roof, in a call shorter or longer than 50 µs; starved where its
	// process's threads lacked their CPUs lately.
	GGMLRooflineBound = "ggml.roofline.bound"
	// GGMLRooflineRoof (string; [SpanNode]): the roof its peak fraction is of: bandwidth,
	// or its kernel class's, flops, int8 or bf16. The profinfer.roofline.peak metric's
	// points name their roof with it too.
	GGMLRooflineRoof = "ggml.roofline.roof"
	// GGMLRooflinePeakFraction (double; [SpanNode]): the fraction of its roof the node
	// reached: of its kernel class's compute peak (fp32 FMA, or int8 dot products for
	// quantised matmuls), or of the bandwidth of the cache levels its bytes come from.
	GGMLRooflinePeakFraction = "ggml.roofline.peak_fraction"
	// GGMLRooflineLevel (string; [SpanNode]): where most of the node's bytes come from
	// under the cache-aware roofline: L1, L2, L3, or DRAM; where sysfs lists no caches, the
	// probe's working-set level that holds them (≤16MiB), or DRAM.
	GGMLRooflineLevel = "ggml.roofline.level"
	// GGMLRooflineFlopsPerSecond (double; [SpanNode]): its achieved FLOP/s.
	GGMLRooflineFlopsPerSecond = "ggml.roofline.flops_per_second"
	// GGMLRooflineBytesPerSecond (double; [SpanNode]): its achieved bytes/s.
	GGMLRooflineBytesPerSecond = "ggml.roofline.bytes_per_second"
)

// Perf counters, where configured.
const (
	// PerfPrefix (int; [SpanNode]): the prefix of each configured perf counter's key,
	// its name with _ for - (perf.task_clock): its delta over the node, summed over its
	// threads, where every thread's was read.
	PerfPrefix = "perf."
	// GGMLCountersBound (string; [SpanNode]): memory, compute or mixed, by the hardware
	// counters.
	GGMLCountersBound = "ggml.counters.bound"
	// GGMLCountersIPC (double; [SpanNode]): instructions per cycle.
	GGMLCountersIPC = "ggml.counters.ipc"
	// GGMLCountersLLCMPKI (double; [SpanNode]): last-level cache misses per thousand
	// instructions.
	GGMLCountersLLCMPKI = "ggml.counters.llc_mpki"
)

// Mixture of experts.
const (
	// GGMLMoEExpertsUsed (int; [SpanNode]): experts a MoE layer's routing chose per token.
	GGMLMoEExpertsUsed = "ggml.moe.experts_used"
	// GGMLMoETokens (int; [SpanNode]): the tokens it routed.
	GGMLMoETokens = "ggml.moe.tokens"
	// GGMLMoEExperts (int[]; [SpanNode]): the experts chosen, token-major.
	GGMLMoEExperts = "ggml.moe.experts"
)
