// Package summary folds profinfer's spans and metrics, as pdata, into what a person
// reads first: per process and model, where each token's time goes, by phase, op and
// layer, how close each op runs to this machine's roofs, one traced token's timeline,
// MoE routing, backend splits and copies. Its state is bounded however long it runs:
// aggregates keyed by op, layer and expert, plus the newest traced graph.
//
// It reads pdata only, so it works the same on the collector that runs the receiver, on
// a gateway that receives OTLP from many, and on the file exporter's JSON lines.
package summary

import (
	"time"

	"github.com/profinfer/profinfer/internal/roofline"
)

// View is a snapshot of everything the page and the report show. It marshals to the
// JSON the page's script renders.
type View struct {
	Generated time.Time  `json:"generated"`
	Processes []*Process `json:"processes"`
}

// Process is one profiled process (on one host) and the model it serves.
type Process struct {
	ID    string `json:"id"`    // host, pid and executable
	Title string `json:"title"` // e.g. "llama-server (pid 1234)"
	Model string `json:"model,omitempty"`
	// Runtime is the GGML runtime whose application layer was probed: llama.cpp,
	// whisper.cpp, ollama, or ggml (graphs and nodes only); "" in older collectors' data.
	Runtime  string     `json:"runtime,omitempty"`
	Resource []KV       `json:"resource"`
	Roofs    Roofs      `json:"roofs"`
	Phases   []*Phase   `json:"phases"`             // prefill, decode and graphs outside a decode, those seen
	Latency  Quantiles  `json:"latency"`            // of decode-phase llama_decode calls
	Requests *Requests  `json:"requests,omitempty"` // generations, from the request spans
	Serving  *Serving   `json:"serving,omitempty"`  // what its decodes carried together
	Jobs     *Jobs      `json:"jobs,omitempty"`     // whisper's transcriptions, from their spans
	Rate     []Rate     `json:"rate"`               // tokens per second over the last minutes
	Timeline *Timeline  `json:"timeline,omitempty"` // the newest traced decode-phase graph
	MoE      []MoELayer `json:"moe,omitempty"`
	Backends []Backend  `json:"backends,omitempty"`
	// Loaded are the GGML backends besides the CPU's that it loaded as libraries.
	Loaded []string `json:"backends_loaded,omitempty"`
	// Software is the software driver its device runs on, in its own threads on the
	// host's CPUs (lavapipe): ggml.device.software. "" for a hardware device, or none.
	Software string    `json:"device_software,omitempty"`
	Copies   []Copy    `json:"copies,omitempty"`
	Counters []string  `json:"counters,omitempty"` // perf counter names the ops carry
	Quota    *Quota    `json:"quota,omitempty"`    // the cgroup CPU quota it runs under
	CPUs     *CPUs     `json:"cpus,omitempty"`     // the CPUs it may run on
	Findings []Finding `json:"findings"`
	LastSeen time.Time `json:"last_seen"`
	// NextWindow is when its next node-sampling window opens (nodes.mode sampled); zero
	// where none is scheduled.
	NextWindow time.Time `json:"next_window,omitzero"`
	// SIMD is the SIMD its CPU backend was built for against its CPU's.
	SIMD SIMD `json:"simd,omitzero"`
	// Cold is its first graph seen against the later ones of its phase; nil before one.
	Cold *Cold `json:"cold,omitempty"`
	// Resumed is its slowest graph after an idle spell that read from the disk; nil
	// before one.
	Resumed *Resumed `json:"resumed,omitempty"`
	// End is how it ended, where profinfer saw it end while traced; nil otherwise.
	End *End `json:"end,omitempty"`
}

// SIMD is what ggml.cpu.simd and host.cpu.simd say, on internal/simd's scale: Build
// below Host (simd.Narrower) leaves the CPU's wider vectors unused. "" where unknown.
type SIMD struct {
	Build string `json:"build,omitempty"`
	Host  string `json:"host,omitempty"`
}

// Cold is a process's first graph seen against the later ones of its phase: its time
// and major page faults, and theirs.
type Cold struct {
	Phase      string  `json:"phase"`
	Seconds    float64 `json:"seconds"`
	Faults     int64   `json:"faults"`
	Warm       float64 `json:"warm_seconds"` // the later graphs of its phase, a graph
	WarmGraphs int64   `json:"warm_graphs"`  // later graphs, of every phase
	WarmFaults int64   `json:"warm_faults"`
}

// Resumed is the slowest graph that began IdleAfter or more after its process's previous
// graph ended and took major page faults, against the later graphs of its phase: a model
// whose pages were reclaimed while its process idled is read back from the disk by the
// first graph after.
type Resumed struct {
	Phase   string  `json:"phase"`
	Idle    float64 `json:"idle_seconds"` // how long the process had computed nothing before it
	Seconds float64 `json:"seconds"`
	Faults  int64   `json:"faults"`
	Warm    float64 `json:"warm_seconds"` // the later graphs of its phase, a graph
	Graphs  int64   `json:"graphs"`       // graphs after an idle spell that took major faults
	// AllFaults are the major page faults of all of them: the disk waits they explain.
	AllFaults int64 `json:"all_faults"`
}

// IdleAfter is how long a process computes nothing before its next graph is one after an
// idle spell (Resumed): requests a second apart are a server's ordinary pace.
const IdleAfter = 1.0 // seconds

// End is how a process ended, from its process span's exit event.
type End struct {
	At    time.Time `json:"at"`
	Cause string    `json:"cause"` // as the kernel gave it, in words
	// Failed says that it did not exit with status 0.
	Failed bool `json:"failed,omitempty"`
	// OOM is where the OOM killer chose it (cgroup, system, unknown); "" where it did not.
	OOM string `json:"oom,omitempty"`
	// Cgroup, Limit, Usage and Peak are the memory cgroup whose limit it met and its
	// bytes, with the cgroup OOM killer.
	Cgroup string `json:"cgroup,omitempty"`
	Limit  int64  `json:"limit,omitempty"`
	Usage  int64  `json:"usage,omitempty"`
	Peak   int64  `json:"peak,omitempty"`
	// Graphs and Steps are what it computed while traced; Cut says that it ended inside
	// a step, which the phases hold as far as it went.
	Graphs int64  `json:"graphs"`
	Steps  int64  `json:"steps"`
	Cut    bool   `json:"cut,omitempty"`
	Text   string `json:"text"` // all of it in a line, for the page and the report
}

// KV is one resource attribute, as text.
type KV struct {
	Key   string `json:"k"`
	Value string `json:"v"`
}

// Roofs are the machine's peaks the verdicts stand on, and how they were obtained.
type Roofs struct {
	FLOPS     float64 `json:"flops,omitempty"`     // FLOP/s, all cores
	Bandwidth float64 `json:"bandwidth,omitempty"` // bytes/s
	Int8      float64 `json:"int8,omitempty"`      // int8 dot-product operations/s: quantised matmuls' roof
	BF16      float64 `json:"bf16,omitempty"`      // bf16 dot-product FLOP/s, where the CPU has them: bf16 matmuls' roof
	// Caches are the data caches' read bandwidths, nearest first: a node whose working
	// set a level holds is judged against it, and Bandwidth is memory's beyond them.
	Caches   []roofline.Level `json:"caches,omitempty"`
	Source   string           `json:"source,omitempty"`   // measured, stored, configured, or derived from spans
	Measured string           `json:"measured,omitempty"` // RFC 3339, when measured
}

// Phase is where the time of one kind of step went: llama_decode's prefill and decode,
// whisper's encode and decode passes, a computation of no known runtime.
type Phase struct {
	Name          string  `json:"name"` // prefill, decode, mixed, encode, compute, or "outside decode"
	Decodes       int64   `json:"decodes"`
	Tokens        int64   `json:"tokens"` // computed in its own steps: a mixed phase's, of both kinds
	DecodeSeconds float64 `json:"decode_seconds"`
	TokensPerSec  float64 `json:"tokens_per_second"` // Tokens over DecodeSeconds
	// MixedTokens, of prefill and decode, are their tokens computed in mixed steps (a
	// prompt's chunk beside other sequences' next tokens), whose time is the mixed
	// phase's: not in Tokens. PromptTokens and NextTokens, of the mixed phase, are its
	// Tokens of each kind.
	MixedTokens  int64 `json:"mixed_tokens,omitempty"`
	PromptTokens int64 `json:"prompt_tokens,omitempty"`
	NextTokens   int64 `json:"next_tokens,omitempty"`
	// Widths are a decode phase's steps by how many sequences each carried.
	Widths []Width `json:"widths,omitempty"`
	// Graphs traced node by node and their time, the denominator of every share;
	// TracedPerturbed of them ran while the collector itself was busy, and TracedFirst
	// were a new context's first, cold (ggml.graph.first).
	TracedGraphs    int64   `json:"traced_graphs"`
	TracedPerturbed int64   `json:"traced_perturbed,omitempty"`
	TracedFirst     int64   `json:"traced_first,omitempty"`
	GraphSeconds    float64 `json:"graph_seconds"`
	NodeSeconds     float64 `json:"node_seconds"`
	// Time the phase's decodes spent in backend splits other than the CPU's, and
	// copying tensors between backends.
	SplitSeconds float64 `json:"split_seconds,omitempty"`
	CopySeconds  float64 `json:"copy_seconds,omitempty"`
	// CPU is what the threads computing the phase's CPU graphs had of the CPUs, over
	// the graphs that carried it (those traced); nil when none did.
	CPU *ThreadsCPU `json:"cpu,omitempty"`
	// Ubatch is the smallest n_ubatch of the contexts its decodes' spans named (0 where
	// none did), and MaxBatch the most tokens one of them carried: a decode of more
	// tokens than its ubatch is computed a ubatch a graph.
	Ubatch   int64 `json:"ubatch,omitempty"`
	MaxBatch int64 `json:"max_batch,omitempty"`
	// KVCells is the most KV cells a query of a traced graph's attention read
	// (ggml.graph.kv_cells): a decode's depth in the cache; MaxCells of any graph's.
	KVCells  int64 `json:"kv_cells,omitempty"`
	MaxCells int64 `json:"max_cells,omitempty"`
	// Deepest is a decode phase's traced graph deepest in the KV cache: its attention at
	// that depth, where the phase's op table blends every traced depth.
	Deepest *Deepest `json:"deepest,omitempty"`
	// Depth is how a decode phase's one-token graphs grew with their depth, fitted over
	// every one of them, traced or not; nil over too narrow a range.
	Depth   *DepthFit `json:"depth,omitempty"`
	Ops     []*Op     `json:"ops"`    // by time, largest first
	Layers  []Layer   `json:"layers"` // by layer number
	OpLayer *OpLayer  `json:"op_layer,omitempty"`
	Sched   SchedSums `json:"sched"`
}

// Deepest is a traced decode graph at the deepest of its phase's traced depths: its KV
// cells, its time and its attention's (FLASH_ATTN_EXT, or SOFT_MAX and the matmuls over
// the KV cache), seconds.
type Deepest struct {
	Cells     int64   `json:"cells"`
	Seconds   float64 `json:"seconds"`
	Attention float64 `json:"attention_seconds"`
}

// DepthFit is the least-squares line of one-token decode graphs' time against their KV
// cells (ggml.graph.kv_cells), over Graphs graphs From to To cells deep: a token's cost
// of depth, read from every graph where a traced one shows it at one depth only.
type DepthFit struct {
	Graphs  int64   `json:"graphs"`
	From    int64   `json:"from_cells"`
	To      int64   `json:"to_cells"`
	MSPer1k float64 `json:"ms_per_1000_cells"` // the slope: ms a token more for each 1000 cells
	BaseMS  float64 `json:"base_ms"`           // the line at 0 cells
}

// ThreadsCPU is how much of a phase's graph time its process's threads had a CPU, over
// every graph the phase computed (each carries it, traced node by node or not).
type ThreadsCPU struct {
	Graphs        int64   `json:"graphs"`
	Wall          float64 `json:"wall_seconds"`   // the graphs' wall time
	ThreadSeconds float64 `json:"thread_seconds"` // the graphs' wall time times their threads
	OnCPU         float64 `json:"on_cpu"`         // seconds the process's threads ran meanwhile
	Wait          float64 `json:"wait"`           // seconds they were runnable, waiting for a CPU
	MajorFaults   int64   `json:"major_faults"`   // page faults that waited for the disk
	Share         float64 `json:"share"`          // OnCPU over ThreadSeconds, at most 1
	// Judged says that the graphs are evidence enough for a verdict; where they are not,
	// Thin says what there was ("not judged: 1 graph, 38 ms").
	Judged bool   `json:"judged"`
	Thin   string `json:"thin,omitempty"`
	// Starved is the verdict on Share (roofline.IsStarved): the page's tile and phase
	// line, the op table and the findings all read it. Lacked says what the threads
	// lacked the CPU for: LackedCPU, LackedDisk or LackedSleep.
	Starved bool   `json:"starved"`
	Lacked  string `json:"lacked,omitempty"`
	// Perturbed graphs, not counted above, ran while the collector itself was busy.
	Perturbed int64 `json:"perturbed,omitempty"`
	// Contended graphs are those whose threads had a CPU for less than roofline.StarvedBelow
	// of their time. Their time per token, less that of the others, times their tokens,
	// is Cost: the time the contention cost; 0 unless a few of the others were seen.
	Contended        int64   `json:"contended"`
	ContendedSeconds float64 `json:"contended_seconds"`
	Cost             float64 `json:"cost_seconds"`
}

// Quota is the cgroup CPU quota a process runs under, and its throttling while profiled.
type Quota struct {
	Cgroup string  `json:"cgroup"`
	CPUs   float64 `json:"cpus"` // quota over period
	// Enforcement periods with runnable tasks, those throttled, and the time throttled
	// (summed over CPUs), between the first and the latest reading; or, when no period
	// passed between them (a process shorter than the metrics interval), since the
	// cgroup was made: SinceMade.
	Periods          int64   `json:"periods"`
	Throttled        int64   `json:"throttled"`
	ThrottledSeconds float64 `json:"throttled_seconds"`
	SinceMade        bool    `json:"since_made,omitempty"`
	// Threads is the most threads the process computed a graph with.
	Threads int64 `json:"threads"`
}

// CPUs are the CPUs a process may run on, as profinfer.process.cpus last gave them, and
// the most threads it computed a graph with.
type CPUs struct {
	Allowed     int   `json:"allowed"`               // logical CPUs in its affinity
	Cores       int   `json:"cores"`                 // physical cores among them
	Performance int   `json:"performance,omitempty"` // a hybrid CPU's performance cores among them; 0 on others
	Threads     int64 `json:"threads"`
	// Idle is how many of those CPUs sat idle, on average, while it computed
	// (profinfer.process.cpus.time): beside its threads, the rest was other processes'.
	Idle float64 `json:"idle,omitempty"`
	// Measured says that Idle was read: an older collector's data has none.
	Measured bool `json:"idle_measured,omitempty"`
	// Others is how many of them other processes (the collector among them) took, on
	// average, over the same spans: neither idle nor the process's own time.
	// OthersMeasured says it was read: the process's own time is known where a CPU
	// graph summed it.
	Others         float64 `json:"others,omitempty"`
	OthersMeasured bool    `json:"others_measured,omitempty"`
}

// Op is one operator on one weight type within a phase: a row of the op table.
type Op struct {
	Op         string           `json:"op"`
	Weight     string           `json:"weight"` // the weights' type for matmuls (the KV cache's after KVPrefix for the attention's), else "none"
	Calls      int64            `json:"calls"`
	TotalMS    float64          `json:"total_ms"`
	MeanUS     float64          `json:"mean_us"`
	Share      float64          `json:"share"`                      // of the phase's traced graph time
	Bound      string           `json:"bound,omitempty"`            // a Bound*; "" where not judged
	Why        string           `json:"why,omitempty"`              // what the verdict stands on, or what it lacks
	FLOPS      float64          `json:"flops_per_second,omitempty"` // achieved, over its time
	Bandwidth  float64          `json:"bytes_per_second,omitempty"`
	Intensity  float64          `json:"intensity,omitempty"`     // FLOPs per byte
	PeakFrac   float64          `json:"peak_fraction,omitempty"` // of the roof that bounds it
	Roof       string           `json:"roof,omitempty"`          // that roof: BoundMemory (bandwidth) or BoundCompute
	Sched      SchedSums        `json:"sched"`
	Counters   map[string]int64 `json:"counters,omitempty"`
	flops, byt float64
	attained   roofline.Attained // of its classified nodes, each against its own roofs
	// memorySecs and computeSecs: its classified nodes' time against a bandwidth roof
	// and against a compute roof.
	memorySecs, computeSecs float64
}

// SchedSums are what the scheduler layer and the barrier probe saw, in seconds.
type SchedSums struct {
	OffCPU      float64 `json:"off_cpu"`
	RunQueue    float64 `json:"runqueue"`
	BarrierWait float64 `json:"barrier_wait"`
	ThreadTime  float64 `json:"thread_time"` // node time times threads: what the others are shares of
	Preemptions int64   `json:"preemptions"`
	Migrations  int64   `json:"migrations"`
}

// Layer is a model layer's time within a phase.
type Layer struct {
	Layer   int     `json:"layer"`
	Seconds float64 `json:"seconds"`
	Share   float64 `json:"share"`
}

// OpLayer is the op × layer matrix of seconds, for the heatmap.
type OpLayer struct {
	Ops     []string    `json:"ops"`
	Layers  []int       `json:"layers"`
	Seconds [][]float64 `json:"seconds"` // [op][layer]
}

// Quantiles of decode latency, in milliseconds.
type Quantiles struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Requests sums the process's finished requests: one generation on one sequence each.
type Requests struct {
	Count int64     `json:"count"`
	TTFT  Quantiles `json:"ttft"` // time to first token, ms
	TPOT  Quantiles `json:"tpot"` // mean time per output token after the first, ms
	// Prompt tokens computed, prompt tokens read from the cache, tokens generated.
	Input     int64 `json:"input"`
	Cached    int64 `json:"cached"`
	Output    int64 `json:"output"`
	MaxShared int64 `json:"max_shared"` // most other sequences in one decode with a request
	// WarmupTokens are the tokens of llama.cpp's warm-ups at load, which no client asked
	// for: in the prefill phase, in no request.
	WarmupTokens int64 `json:"warmup_tokens,omitempty"`
	// Requests that computed a prompt start (its first 64 tokens) an earlier request had
	// computed, and the prompt tokens of theirs the earlier requests' held.
	Recomputed       int64 `json:"recomputed,omitempty"`
	RecomputedTokens int64 `json:"recomputed_tokens,omitempty"`
	// Wait is, of the requests whose arrival was seen, the time from it to their first
	// decode, ms. Queued are those that waited QueuedWait or more for their slot (the
	// request before them on it still computing when they came), with their waits and
	// their times to first token after it summed, in seconds.
	Wait       *Quantiles `json:"wait,omitempty"`
	Queued     int64      `json:"queued,omitempty"`
	QueuedWait float64    `json:"queued_wait_seconds,omitempty"`
	QueuedTTFT float64    `json:"queued_ttft_seconds,omitempty"`
	// GapMedian and GapMax are, over the requests of two outputs or more, each one's
	// median and longest gap between output tokens, ms.
	GapMedian Quantiles `json:"gap_median"`
	GapMax    Quantiles `json:"gap_max"`
	// Stalled are the requests whose longest gap was StallRatio× their median or more
	// and held other requests' prompts; StallPrompts the prompt tokens computed in those
	// gaps, summed. StallSeconds is the time every request's generation waited for other
	// requests' prompts (llama.request.prompt_stall), summed, and StallOutput the output
	// tokens of the requests that waited.
	Stalled      int64   `json:"stalled,omitempty"`
	StallRatio   float64 `json:"stall_ratio,omitempty"` // StallRatio, where some stalled
	StallPrompts int64   `json:"stall_prompts,omitempty"`
	StallSeconds float64 `json:"stall_seconds,omitempty"`
	StallOutput  int64   `json:"stall_output,omitempty"`
	// Time is where the requests' latency went, summed over them, seconds: the wait
	// for their first decode (where their arrival was seen), then their spans' shares
	// (TimeShares names them). Latency is their latency, summed: the wait and the span.
	Time    []TimeShare `json:"time,omitempty"`
	Latency float64     `json:"latency_seconds,omitempty"`
	// Full are the requests whose sequence reached the cells one sequence may hold
	// (a server stops them there, or shifts their context), Shifts the context shifts
	// of their sequences, and Truncated those full with no shift: cut at the context's
	// end. MaxCells is the most cells one request's sequence held.
	Full      int64 `json:"full,omitempty"`
	Shifts    int64 `json:"shifts,omitempty"`
	Truncated int64 `json:"truncated,omitempty"`
	MaxCells  int64 `json:"max_cells,omitempty"`
}

// TimeShare is one share of the requests' latency, seconds.
type TimeShare struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// TimeShares are the shares of a request's latency, in the order they are shown: its
// wait for a slot, its prompt, the decodes that computed its next tokens (alone, beside
// other sequences' next tokens, beside other requests' prompts), its context's decodes
// without it, and the server's time between decodes.
var TimeShares = []string{"wait", "prompt", "alone", "batched", "mixed", "other_prompts", "other_decodes", "between"}

// StallRatio is how many times its median gap a request's longest gap between output
// tokens is, from which it counts as stalled: a server's steps vary by a few tens of
// percent as slots come and go; a prompt computed between two tokens takes many steps'
// time.
const StallRatio = 5.0

// QueuedWait is the wait between a request's arrival and its first decode, in seconds,
// from which it counts as queued: reading and tokenizing a request takes milliseconds;
// a tenth of a second is another request's prefill or a dozen of its tokens.
const QueuedWait = 0.1

// Jobs sums a whisper.cpp process's transcriptions: the audio given, the time taken, and
// the time of its encoder's and decoder's passes.
type Jobs struct {
	Count         int64     `json:"count"`
	AudioSeconds  float64   `json:"audio_seconds"`
	Seconds       float64   `json:"seconds"`
	RTF           Quantiles `json:"rtf"` // real-time factor: time over audio, per transcription (not ms)
	EncodePasses  int64     `json:"encode_passes"`
	EncodeSeconds float64   `json:"encode_seconds"`
	DecodePasses  int64     `json:"decode_passes"`
	DecodeSeconds float64   `json:"decode_seconds"`
}

// Rate is the tokens computed in one second of wall time, by phase (a mixed step's in
// theirs), the decodes that ended in it and the sequences they carried, summed (over
// Steps: the slots in use), and the most KV cells in use after one.
type Rate struct {
	Time      int64 `json:"t"` // unix seconds
	Prefill   int64 `json:"prefill"`
	Decode    int64 `json:"decode"`
	Steps     int64 `json:"steps,omitempty"`
	Sequences int64 `json:"sequences,omitempty"`
	KVCells   int64 `json:"kv_cells,omitempty"`
}

// Timeline is one traced graph, node by node, across its threads, and the device work
// of the same decode.
type Timeline struct {
	Phase    string  `json:"phase"`
	Tokens   int64   `json:"tokens"`
	Start    int64   `json:"start"` // unix ns
	Duration float64 `json:"duration_us"`
	Threads  int     `json:"threads"`
	Critical float64 `json:"critical_us"` // the critical path's length
	Nodes    []Node  `json:"nodes"`
	Device   []Work  `json:"device,omitempty"`
}

// Work is a device's work on a split of the timeline's decode, or a copy a CPU thread
// queued to a device there; times in µs from the graph's start (before it: negative).
type Work struct {
	Backend  string  `json:"backend"` // the device's; a copy's destination
	Copy     bool    `json:"copy,omitempty"`
	Start    float64 `json:"s"`
	Duration float64 `json:"d"`
	Wait     float64 `json:"wait,omitempty"`  // a split's: µs the CPU waited for it
	Bound    bool    `json:"bound,omitempty"` // a split's end is a bound (ggml.device.end_bound)
	Nodes    int64   `json:"nodes,omitempty"`
	Bytes    int64   `json:"bytes,omitempty"` // a copy's
	Tensor   string  `json:"tensor,omitempty"`
}

// Node is one node of the timeline; times in µs from the graph's start.
type Node struct {
	Op       string    `json:"op"`
	Tensor   string    `json:"tensor"`
	Start    float64   `json:"s"`
	Duration float64   `json:"d"`
	Busy     []float64 `json:"busy,omitempty"` // per thread, µs computing before its barrier
	Critical bool      `json:"c,omitempty"`
}

// MoELayer is one MoE layer's expert selections.
type MoELayer struct {
	Layer      int     `json:"layer"`
	Selections []int64 `json:"selections"`
	Imbalance  float64 `json:"imbalance"` // coefficient of variation
}

// Backend is the time a backend computed splits. On the CPU's, Seconds is the
// computation; on a device's, it is the CPU handing the work over, and DeviceSeconds runs
// from each handing over until the CPU saw the work done, WaitSeconds of it blocked.
type Backend struct {
	Backend       string  `json:"backend"`
	Splits        int64   `json:"splits"`
	Seconds       float64 `json:"seconds"`
	DeviceSplits  int64   `json:"device_splits,omitempty"` // those seen done
	DeviceSeconds float64 `json:"device_seconds,omitempty"`
	WaitSeconds   float64 `json:"wait_seconds,omitempty"`
	// Ops counts the nodes read from the device's splits, by op: what the device
	// computed. OpSeconds is the device's own time for them, where its backend measured
	// it (ggml-vulkan's perf logger).
	Ops       map[string]int64   `json:"ops,omitempty"`
	OpSeconds map[string]float64 `json:"op_seconds,omitempty"`
	// Layers are the model layers offloaded to the device, in order: those of the nodes
	// it computes that run where a layer's weights are, matmuls and row reads (the
	// weightless nodes that end a layer may run beside the next layer's), in
	// llama_decode calls of fewer than 32 tokens: from 32, ggml's op offload hands the
	// device the matmuls of layers left on the CPU too.
	Layers []int `json:"layers,omitempty"`
}

// Copy is the tensor copies from one backend to another.
type Copy struct {
	Source      string  `json:"source"`
	Destination string  `json:"destination"`
	Copies      int64   `json:"copies"`
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"`
}

// Finding is a rule's conclusion: what to change, and the figures it stands on.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Advice   string   `json:"advice"`
	Evidence []string `json:"evidence"`
	// Gain is what the run would gain without the cause, where the figures allow an
	// estimate; findings are ordered by it.
	Gain *Gain `json:"gain,omitempty"`
}

// Severity is how strongly a finding asks for a change: a warning's cause costs the run
// time worth acting on; information names a cause and its cost, for the reader to weigh.
type Severity string

const (
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Gain is a phase's time per token as measured and as estimated without a finding's
// cause, what the estimate assumes, and the seconds it would have saved over the run. A
// gain Per "request" is a latency's instead, its time a request: Phase names it (time to
// first token), and the seconds saved are the requests' own.
type Gain struct {
	Phase   string  `json:"phase"`
	Per     string  `json:"per,omitempty"` // "request"; a token where empty
	From    float64 `json:"from_ms"`       // ms a token, or a request
	To      float64 `json:"to_ms"`
	Saved   float64 `json:"saved_seconds"`
	Assumes string  `json:"assumes"`
}

// PerRequest is Gain.Per for a request's latency.
const PerRequest = "request"
