package schema

// Histograms, which mdatagen's MetricsBuilder cannot build: internal/signals assembles
// them next to the generated metrics (metadata.MetricsInfo names those).
const (
	// HistogramOpDuration (s; [GGMLOp], [GGMLWeightType], [GGMLTensorType]): duration of
	// computed graph nodes, from the first thread's start to the last thread's end.
	HistogramOpDuration = "ggml.op.duration"
	// HistogramDecodeDuration (s; [LlamaPhase], [LlamaBatchWidth] on decode's):
	// duration of llama_decode calls.
	HistogramDecodeDuration = "llama.decode.duration"
	// HistogramRequestDuration (s; [GenAIOperationName], [GenAIProviderName],
	// [GenAIRequestModel]): time from a request's first decode to its last, as the
	// engine computed it.
	HistogramRequestDuration = "gen_ai.server.request.duration"
	// HistogramTimeToFirstToken (s; [GenAIOperationName], [GenAIProviderName],
	// [GenAIRequestModel]): time from a request's first decode to the end of the decode
	// that computed its first output token.
	HistogramTimeToFirstToken = "gen_ai.server.time_to_first_token"
	// HistogramTimePerOutputToken (s; [GenAIOperationName], [GenAIProviderName],
	// [GenAIRequestModel]): mean time per output token after the first, per request.
	HistogramTimePerOutputToken = "gen_ai.server.time_per_output_token"
	// HistogramBatchSequences ({sequence}; none): sequences per llama_decode batch.
	HistogramBatchSequences = "llama.batch.sequences"
	// HistogramBatchTokens ({token}; none): tokens per llama_decode batch, named as the
	// span attribute.
	HistogramBatchTokens = LlamaBatchTokens
)

// Data point attributes of the histograms.
const (
	// LlamaBatchWidth: of a llama.decode.duration point of phase decode, how many
	// sequences its steps added a token to, as Widths names them.
	LlamaBatchWidth = "llama.batch.width"
)

// Widths are the buckets of a decode step's width, by the most sequences each holds:
// each of one to four apart (llama.cpp's CPU kernels change at four: its repacked
// matmuls take four sequences at a time), then by powers of two.
var Widths = [...]struct {
	Max  int
	Name string
}{{1, "1"}, {2, "2"}, {3, "3"}, {4, "4"}, {8, "5-8"}, {16, "9-16"}, {32, "17-32"}, {64, "33-64"}, {1 << 30, "65+"}}

// Width returns the index in Widths of a decode step of n sequences (at least one).
func Width(n int) int {
	for i, w := range Widths {
		if n <= w.Max {
			return i
		}
	}
	return len(Widths) - 1
}

// Keys of the generated metrics' data point attributes that readers look up (the
// MetricsBuilder writes them; schema_test.go checks them against it). [GGMLLayer] is
// and [GGMLRooflineRoof] are too.
const (
	// ProfinferRooflineSource: where the roofs came from.
	ProfinferRooflineSource = "profinfer.roofline.source"
	// ProfinferRooflineMeasured: when the roofs were measured.
	ProfinferRooflineMeasured = "profinfer.roofline.measured"
	// ProfinferRooflineCacheLevel: the cache level of a profinfer.roofline.cache.bandwidth
	// point, L1, L2 or L3.
	ProfinferRooflineCacheLevel = "profinfer.roofline.cache.level"
	// ProfinferRooflineCacheSize: the bytes that cache level holds.
	ProfinferRooflineCacheSize = "profinfer.roofline.cache.size"
	// GGMLMoEExpert: the expert of a ggml.moe.expert.selections point.
	GGMLMoEExpert = "ggml.moe.expert"
	// ProfinferCgroupPath: the cgroup of the profinfer.cgroup.cpu.* points.
	ProfinferCgroupPath = "profinfer.cgroup.path"
	// ProfinferCPUsKind: which CPUs a profinfer.process.cpus point counts.
	ProfinferCPUsKind = "profinfer.cpus.kind"
	// ProfinferCPUsTimeOf: which time on a process's CPUs a profinfer.process.cpus.time
	// point is: idle, all, or the process's own.
	ProfinferCPUsTimeOf = "profinfer.cpus.time.of"
)
