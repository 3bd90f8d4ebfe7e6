package assemble

import (
	"fmt"

	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/roofline"
)

// Src is the type and shape of one source tensor.
type Src struct {
	Type  string
	Shape [4]int64
	Text  string // Type and Shape as one attribute value, e.g. "q4_0[2048 2048 1 1]"
}

// NewSrc describes a source tensor.
func NewSrc(typ string, shape [4]int64) Src {
	return Src{Type: typ, Shape: shape, Text: fmt.Sprintf("%s%v", typ, shape)}
}

// NodeInfo describes the tensor a node computes.
type NodeInfo struct {
	Op      string
	Name    string
	Type    string
	Shape   [4]int64
	Srcs    []Src
	FusedOp string // the op of the second node a fused kernel computed with this one
	// Work estimates the work the node does and the memory it moves, from its shapes and
	// types; zero when the types' sizes are unknown.
	roofline.Work
	// Reads are the tensors whose data the node reads, views resolved to the tensor that
	// owns the data; Owner is the tensor owning the node's own data when the node writes
	// into a view (a copy into the KV cache), else 0. They link nodes to their producers.
	Reads []uint64
	Owner uint64
}

// ThreadTime is one thread's share of a node: busy from Start to Busy, then in the
// closing barrier until End.
type ThreadTime struct {
	TID              uint32
	Ith              int
	Start, Busy, End uint64
	Counted          bool            // Counters is known
	Counters         events.Counters // perf counter deltas from Start to End
}

// ThreadCounters is one thread's perf counter deltas.
type ThreadCounters struct {
	TID      uint32
	Counters events.Counters
}

// Node is one computed graph node.
type Node struct {
	Tensor     uint64
	Tensor2    uint64    // the second node a fused kernel computed, or 0
	Info       *NodeInfo // nil when thread 0's detail was not seen
	Start, End uint64    // first thread's start, last thread's end
	Threads    []ThreadTime
	Sched      events.CPUSched // what the scheduler did to its threads meanwhile, summed
	// Counters sums the perf counter deltas of the Counted thread shares; they are
	// complete when Counted is len(Threads).
	Counters events.Counters
	Counted  int
	Routing  *Routing // MoE nodes: the experts each token was routed to

	started uint64 // the GGML threads (ith < 64) that started it
	again   *Node  // the next computation of the same tensor in the graph
}

// startedBy says whether thread ith started this computation of the node. Threads
// numbered 64 and up are not told apart: their repeated computations merge.
func (n *Node) startedBy(ith int) bool { return ith < 64 && n.started&(1<<ith) != 0 }

func (n *Node) markStarted(ith int) {
	if ith < 64 {
		n.started |= 1 << ith
	}
}

// Routing is what a MoE router chose: for each token, the experts it is computed by. The
// MoE nodes of a layer read the same ids tensor and share one Routing.
type Routing struct {
	Name    string  // the tensor name of the first node that read it, e.g. ffn_moe_gate-3
	NExpert int     // the layer's experts, from that node's weights (MUL_MAT_ID), else 0
	IDs     uint64  // the ids tensor
	Tokens  int     // tokens routed; Experts covers the first len(Experts)/Used of them
	Used    int     // experts per token
	Experts []int32 // token-major, Used per token, in the router's order
}

// Graph is one CPU-backend graph computation.
type Graph struct {
	PID, TID   uint32
	Ptr        uint64
	NNodes     int // nodes in the graph, computed or not
	NThreads   int
	Start, End uint64
	Traced     bool // node probes were attached for the whole graph
	// Cut says that the process ended inside the graph: End is its end, and Nodes those
	// started by then.
	Cut bool
	// FillsWindow marks the last graph the newest sampling window traces: it can close.
	FillsWindow bool
	// First marks the first graph since a backend scheduler was seen made: a new
	// context's first, cold.
	First bool
	Nodes []*Node // computed nodes, in order of first start; nil unless Traced
	// Outside holds, per thread, the perf counter deltas from the thread's exit from the
	// previous graph to its first node in this one; nil unless Traced.
	Outside []ThreadCounters
	// Routings are the graph's MoE layers, in order; nil unless Traced.
	Routings []*Routing
	CPU      GraphCPU
	// Cells are the KV cells a query of its attention reads at most, from its decode's
	// positions (Step.attended); 0 where unknown.
	Cells    float64
	byTensor map[uint64]*Node
	cpuEnter events.ThreadsCPU
}

// Split is one ggml_backend_graph_compute_async call: the part of a decode's graph that
// one backend computes, as the backend scheduler split it. On the CPU backend it holds
// the CPU graph; on others (RPC, GPUs) it is the time the call took to hand the work
// over, which for an RPC backend includes sending the graph.
type Split struct {
	TID        uint32
	Backend    string
	NNodes     int
	Start, End uint64
	// Device says that a backend other than the CPU's computed it: its work ends after
	// the call returns, when the CPU, waiting for the backend (ggml_backend_synchronize),
	// sees it done at Done; 0 if no wait was seen. Wait is how long that wait blocked.
	// Bound says that Done is only a bound: the CPU asked after the work had ended (it
	// hardly waited), or a later split on the backend was what the wait waited for.
	Device      bool
	BackendAddr uint64
	Done, Wait  uint64
	Bound       bool
	// Nodes are the split's nodes in order, read from its graph when it was handed over,
	// in a sampling window; a device times none of them.
	Nodes []*NodeInfo
	// Timed are the nodes the device timed itself, in order, where the backend's own
	// logger is on (ggml-vulkan's GGML_VK_PERF_LOGGER): every split's, windows or not.
	Timed  []TimedNode
	labels map[string][]int // Timed's indexes by label, once times come
}

// TimedNode is a node a device timed: NS is its time by the device's own timestamps,
// known if Known (a time lost with a record leaves it unknown). Label is what the
// backend filed the time under (ggml-vulkan: op, types, shape, fusion).
type TimedNode struct {
	Info  *NodeInfo
	Label string
	NS    uint64
	Known bool
}

// boundWait is the longest wait for a backend that still means its work had ended before:
// the call's own cost (a fence already signalled), not a wait.
const boundWait = 20_000 // ns

// Copy is one ggml_backend_tensor_copy: the scheduler moving a split's input from the
// backend that holds it to the one that reads it.
type Copy struct {
	TID        uint32
	Src, Dst   string // the backends of the source and destination buffers
	Tensor     string // the source tensor's name
	Bytes      int64
	Start, End uint64
	// Queued says that a device queued the copy with its work (cpy_tensor_async): Start
	// to End is the CPU's share, the transfer runs on the device after.
	Queued bool
}

// StepKind is which application call a Step is.
type StepKind uint8

const (
	// LlamaDecode is a llama_decode call: Tokens, Context and Batch are its own.
	LlamaDecode StepKind = iota
	// SchedCompute is a backend scheduler's computation of a graph
	// (ggml_backend_sched_graph_compute_async), the unit of work of runtimes without
	// llama_decode: whisper.cpp's encoder and decoder passes, Ollama's own engine's
	// batches, any other GGML program's graphs. Head describes the graph.
	SchedCompute
)

// Step is one unit of a runtime's work: a llama_decode call, or a scheduler's computation
// of a graph. It holds the splits, copies and graphs computed inside it.
type Step struct {
	Kind     StepKind
	PID, TID uint32
	Tokens   int          // LlamaDecode: the batch's tokens; SchedCompute: the rows its first node gets, if it gets rows
	Context  uint64       // LlamaDecode: the llama_context
	Batch    events.Batch // LlamaDecode: its tokens per sequence
	// implied is the first position of a batch without positions, where its process's
	// memory tells it; -1 where not.
	implied  int32
	Settings ggml.Params // LlamaDecode: its llama_context's, where read; set by the sink
	// Mix is what its sequences did, as the requests that follow them read it: set by
	// the sink (requests.Tracker) before it is exported; zero for other steps.
	Mix        Mix
	Head       *Head // SchedCompute: what the graph begins with
	Job        *Job  // the job it is part of (whisper's transcription), or nil
	Start, End uint64
	Result     int
	// Name, Phase and Stage are what the process's runtime calls a SchedCompute step, the
	// phase its graphs are folded into, and which of the runtime's graphs it computed
	// (whisper.cpp: whisper.encode, encode, conv); set by the sink before it exports it.
	Name, Phase, Stage string
	// Dropped says that records of the step were lost: it reaches the sink only for
	// its batch and times, with nothing below it.
	Dropped bool
	// Cut says that the process ended inside the step: End is its end, and it holds
	// what was computed by then.
	Cut    bool
	Splits []Split
	Copies []Copy
	Graphs []*Graph
}

// Head is what a scheduler's computation begins with: its graph and scheduler, and the
// graph's first node, described. A runtime tells its graphs apart by it, and a batch's
// tokens by the rows the node gets.
type Head struct {
	Graph, Sched    uint64
	Nodes, Backends int
	First           *NodeInfo // nil where it could not be read
}

// Job is a runtime's unit of work over many steps: whisper.cpp's transcription
// (whisper_full_with_state).
type Job struct {
	PID, TID   uint32
	Samples    int    // audio samples given, 16 kHz
	Context    uint64 // the whisper_context
	Start, End uint64
	Result     int
	Dropped    bool // records of it were lost
	lost       uint64
	// Phases sums its steps' time and count by phase, as the sink named them.
	Phases map[string]JobPhase
	// Trace and Span identify its span, set by whoever exports a span inside it first.
	Trace [16]byte
	Span  [8]byte
}

// JobPhase is the steps of one phase inside a job.
type JobPhase struct {
	Steps int
	NS    uint64
}

// Sink receives what the assembler finishes.
type Sink interface {
	// Step is called when a step returns, with the graphs it computed.
	Step(*Step)
	// Graph is called for a graph computed outside any step (e.g. by an RPC server).
	Graph(*Graph)
	// Job is called when a job returns, after the steps inside it.
	Job(*Job)
}

// Stats counts what could not be assembled.
type Stats struct {
	OrphanEvents  uint64 // node or barrier events with no graph open
	DroppedGraphs uint64 // graphs not delivered: records of theirs were lost
	DroppedDecode uint64 // steps not delivered, likewise
	DroppedJobs   uint64 // jobs whose exit was lost
	PartialGraphs uint64 // graphs whose nodes were dropped: the node probes came or went mid-graph, or their window was full
}

// Mix is what a decode's sequences did: those computing a prompt (or a chunk of one),
// and those adding their next token, generating. A server computes every generating
// slot's next token in one decode, and a new request's prompt chunk beside them; read by
// batch size alone, such a decode would be a prefill.
type Mix struct {
	PromptSeqs, PromptTokens int
	NextSeqs, NextTokens     int // one token each, more where a draft is verified
	// KVCells is the KV cells its context's sequences held after it, summed (positions
	// up to the highest each reached); KVSeqMax the most one of them held.
	KVCells, KVSeqMax int
}

// The phases a decode is in, by its Mix.
const (
	PhasePrefill = "prefill" // every sequence computed a prompt
	PhaseDecode  = "decode"  // every sequence added its next token
	PhaseMixed   = "mixed"   // a prompt's chunk beside other sequences' next tokens
)

// Phase is the decode's phase.
func (m Mix) Phase() string {
	switch {
	case m.PromptSeqs == 0:
		return PhaseDecode
	case m.NextSeqs == 0:
		return PhasePrefill
	}
	return PhaseMixed
}

// Sequences is how many sequences the decode carried: a decode step's width.
func (m Mix) Sequences() int { return m.PromptSeqs + m.NextSeqs }

// Mixed returns d's Mix where it was set, else one read from its tokens alone: one
// sequence, adding its next token where it is one token, computing a prompt otherwise.
func (d *Step) Mixed() Mix {
	switch {
	case d.Mix.Sequences() > 0:
		return d.Mix
	case d.Tokens == 1:
		return Mix{NextSeqs: 1, NextTokens: 1}
	}
	return Mix{PromptSeqs: 1, PromptTokens: d.Tokens}
}
