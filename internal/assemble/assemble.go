// Package assemble turns the per-thread event stream of a GGML runtime into nodes,
// graphs and decode steps. It is pure logic: events in, finished structures out, so it is
// tested with recorded streams and no kernel.
//
// Per thread, a node is busy from its start event to the last ggml_barrier entry before
// the thread's next node start (kernels such as MUL_MAT call the barrier internally, so
// the first barrier is not the end). From there to the next start the thread waits in the
// node's closing barrier for the slowest thread and wakes up: still the node's wall time,
// since the next node cannot start before it. A node's span therefore runs from its first
// thread's start to its last thread's next start.
//
// Node probes are attached only while nodes are traced (see NodesOn). A graph keeps its
// nodes only when one such window covers it whole; any other graph is delivered without
// nodes, so a partly traced graph never reaches a span.
//
// With perf counters, every node start and every thread's exit from the graph carry the
// thread's counter values. The difference between two readings on a thread goes to the
// node it ran in between, or, from a thread's graph exit to its next node start, to the
// thread's time outside nodes (Graph.Outside, on the graph that follows).
package assemble

import (
	"encoding/binary"
	"fmt"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/events"
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
	// FLOPs and Bytes estimate the work the node does and the memory it moves, from its
	// shapes and types; zero when the types' sizes are unknown.
	FLOPs, Bytes float64
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
	// FillsWindow marks the last graph the newest sampling window traces: it can close.
	FillsWindow bool
	Nodes       []*Node // computed nodes, in order of first start; nil unless Traced
	// Outside holds, per thread, the perf counter deltas from the thread's exit from the
	// previous graph to its first node in this one; nil unless Traced.
	Outside []ThreadCounters
	// Routings are the graph's MoE layers, in order; nil unless Traced.
	Routings []*Routing
	CPU      GraphCPU
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
	Kind       StepKind
	PID, TID   uint32
	Tokens     int          // LlamaDecode: the batch's tokens; SchedCompute: the rows its first node gets, if it gets rows
	Context    uint64       // LlamaDecode: the llama_context
	Batch      events.Batch // LlamaDecode: its tokens per sequence
	Head       *Head        // SchedCompute: what the graph begins with
	Job        *Job         // the job it is part of (whisper's transcription), or nil
	Start, End uint64
	Result     int
	// Name, Phase and Stage are what the process's runtime calls a SchedCompute step, the
	// phase its graphs are folded into, and which of the runtime's graphs it computed
	// (whisper.cpp: whisper.encode, encode, conv); set by the sink before it exports it.
	Name, Phase, Stage string
	// Dropped says that records of the step were lost: it reaches the sink only for
	// its batch and times, with nothing below it.
	Dropped bool
	Splits  []Split
	Copies  []Copy
	Graphs  []*Graph
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
	DroppedGraphs uint64 // graphs not delivered: records of theirs were lost, or their process exited
	DroppedDecode uint64 // steps not delivered, likewise
	DroppedJobs   uint64 // jobs whose exit was lost
	PartialGraphs uint64 // graphs whose nodes were dropped: the node probes came or went mid-graph, or their window was full
}

type thread struct {
	tid         uint32
	cur         *Node
	curStart    uint64
	curSched    events.CPUSched
	ith         int
	lastBarrier uint64
	ctr         counting // kept from graph to graph
}

// counting is where a thread's perf counters stand.
type counting struct {
	last    events.Counters
	valid   bool  // last is a reading to take differences from
	outside bool  // last was read at the thread's exit from a graph
	late    *Node // closed by the graph's exit before the thread's own exit came
}

// read takes a new reading (nil: the event had none, which breaks the chain) and returns
// the difference from the previous one, if there was a valid one.
func (c *counting) read(v *events.Counters) (d *events.Counters) {
	if v == nil {
		*c = counting{}
		return nil
	}
	if c.valid {
		diff := v.Sub(c.last)
		d = &diff
	}
	c.last, c.valid, c.outside, c.late = *v, true, false, nil
	return d
}

type process struct {
	decode *Step // the open step
	job    *Job  // the open job
	split  *Split
	// held is the last decode, kept from the sink while a device computes its splits:
	// the CPU's wait for them ends them, or the next decode sends it as it is.
	held    *Step
	wait    *backendWait
	copy    *Copy
	graph   *Graph
	threads map[uint32]*thread
	windows [4]window // the latest node-tracing windows, newest at windows[next-1]
	next    int
	// lost is the count of the process's lost records at the last exit delivered or
	// dropped: an exit that carries another lost some of what it closes.
	lost uint64
	// loose are, in a process that decodes (Decodes), the graphs outside any decode that
	// came before its first decode was seen, held: a decode profinfer came in the middle
	// of ends with an exit whose entry it never saw, and its graphs are dropped then.
	// settled says that a decode's entry or maxLoose graphs came, and loose graphs go as
	// they come.
	loose            []*Graph
	decodes, settled bool
	recent           recentCPU // the threads' CPU over the latest graphs, for GraphCPU.Starved
}

// window is a span of time during which the node probes were attached; Off is 0 while
// they still are. It traces the first Graphs graphs that start and end in it (all if 0):
// probes detached a moment after its last graph may see another whole, when the machine
// is slow to wake the reader.
type window struct {
	On, Off        uint64
	Graphs, traced int
}

func (w window) covers(start, end uint64) bool {
	return w.On != 0 && w.On <= start && (w.Off == 0 || end <= w.Off)
}

// Assembler keeps the in-flight state of every traced process. It is not safe for
// concurrent use: one goroutine feeds it the ring buffer in order.
type Assembler struct {
	sink  Sink
	procs map[uint32]*process
	busy  busy
	Stats Stats
}

// New returns an assembler that delivers to sink.
func New(sink Sink) *Assembler {
	return &Assembler{sink: sink, procs: map[uint32]*process{}}
}

func (a *Assembler) proc(pid uint32) *process {
	p := a.procs[pid]
	if p == nil {
		p = &process{threads: map[uint32]*thread{}}
		a.procs[pid] = p
	}
	return p
}

// DecodeEnter starts a llama_decode of tokens tokens. A step still open lost its exit.
func (a *Assembler) DecodeEnter(pid, tid uint32, ts uint64, tokens int, ctx uint64, batch *events.Batch) {
	p := a.enter(pid)
	p.decode = &Step{PID: pid, TID: tid, Tokens: tokens, Context: ctx, Start: ts, Job: p.job}
	if batch != nil {
		p.decode.Batch = *batch
	}
}

// StepEnter starts a scheduler's computation of the graph head describes. Inside a
// llama_decode (a process whose runtime is probed for both) it is the decode's own, and
// adds nothing.
func (a *Assembler) StepEnter(pid, tid uint32, ts uint64, head *Head) {
	if p := a.procs[pid]; p != nil && p.decode != nil && p.decode.Kind == LlamaDecode && p.decode.TID == tid {
		return
	}
	p := a.enter(pid)
	p.decode = &Step{Kind: SchedCompute, PID: pid, TID: tid, Head: head, Tokens: head.tokens(), Start: ts, Job: p.job}
}

// tokens are the rows a computation's first node gets, when it gets rows (GET_ROWS of a
// token embedding, by the batch's token ids): the batch's tokens. 0 otherwise.
func (h *Head) tokens() int {
	if h.First == nil || h.First.Op != "GET_ROWS" || len(h.First.Srcs) < 2 {
		return 0
	}
	return int(h.First.Srcs[1].Shape[0])
}

// enter readies process pid for a step's entry: one still open lost its exit.
func (a *Assembler) enter(pid uint32) *process {
	p := a.proc(pid)
	if p.decode != nil {
		a.dropDecode(p.decode)
	}
	a.release(p)
	a.settle(p)
	return p
}

// Decoding says whether process pid is inside a step.
func (a *Assembler) Decoding(pid uint32) bool {
	p := a.procs[pid]
	return p != nil && p.decode != nil
}

// DecodeExit finishes the open llama_decode. lost is the count of the process's lost
// records: if it grew since the last exit, the decode is dropped whole.
func (a *Assembler) DecodeExit(pid, tid uint32, ts uint64, result int, lost uint64) {
	a.exit(pid, tid, LlamaDecode, ts, result, lost)
}

// StepExit finishes the open scheduler's computation, as DecodeExit a decode.
func (a *Assembler) StepExit(pid, tid uint32, ts uint64, result int, lost uint64) {
	a.exit(pid, tid, SchedCompute, ts, result, lost)
}

func (a *Assembler) exit(pid, tid uint32, kind StepKind, ts uint64, result int, lost uint64) {
	p := a.proc(pid)
	d := p.decode
	if d == nil || d.TID != tid || d.Kind != kind {
		if d != nil && d.Kind != kind {
			return // a computation inside a decode, which its entry left out
		}
		p.lost = lost
		if !p.settled { // entered before profinfer came: its graphs go with it
			a.Stats.DroppedGraphs += uint64(len(p.loose))
			p.loose = nil
			p.settled = true
		}
		return // entered before profinfer attached, or its entry was lost
	}
	p.decode = nil
	if lost != p.lost {
		p.lost = lost
		a.dropDecode(d)
		// Its batch is whole, and the requests it carried still need it.
		*d = Step{Kind: d.Kind, PID: d.PID, TID: d.TID, Tokens: d.Tokens, Context: d.Context, Batch: d.Batch, Head: d.Head,
			Job: d.Job, Start: d.Start, End: ts, Result: result, Dropped: true}
		a.sink.Step(d)
		return
	}
	d.End, d.Result = ts, result
	if d.running() {
		p.held = d
		return
	}
	a.sink.Step(d)
}

// JobEnter starts a job of samples audio samples on whisper_context ctx. A job still
// open lost its exit.
func (a *Assembler) JobEnter(pid, tid uint32, ts uint64, samples int, ctx uint64) {
	p := a.proc(pid)
	if p.job != nil {
		a.Stats.DroppedJobs++
	}
	p.job = &Job{PID: pid, TID: tid, Samples: samples, Context: ctx, Start: ts, lost: p.lost}
}

// JobExit finishes the open job, after the steps inside it: a step a device still
// computes is sent first, as it is. lost is the count of the process's lost records: if
// it grew since the job's entry, the job is marked dropped, as some of it was lost.
func (a *Assembler) JobExit(pid, tid uint32, ts uint64, result int, lost uint64) {
	p := a.proc(pid)
	j := p.job
	if j == nil || j.TID != tid {
		return // entered before profinfer attached
	}
	p.job = nil
	a.release(p)
	j.End, j.Result = ts, result
	j.Dropped = j.Dropped || lost != j.lost
	a.sink.Job(j)
}

// release sends the held decode to the sink as it is: its device work was not seen to end.
func (a *Assembler) release(p *process) {
	if p.held != nil {
		a.sink.Step(p.held)
		p.held = nil
	}
}

func (a *Assembler) dropDecode(d *Step) {
	a.Stats.DroppedDecode++
	a.Stats.DroppedGraphs += uint64(len(d.Graphs))
}

// NodesOn records that the node probes of process pid were attached by ts: the first
// graphs graphs (all if 0) that start after it are traced until NodesOff. Counter
// readings start afresh: what the threads did meanwhile was not traced.
func (a *Assembler) NodesOn(pid uint32, ts uint64, graphs int) {
	p := a.proc(pid)
	for _, t := range p.threads {
		t.ctr = counting{}
	}
	p.windows[p.next%len(p.windows)] = window{On: ts, Graphs: graphs}
	p.next++
}

// NodesOff records that the node probes of process pid are detached from ts on.
func (a *Assembler) NodesOff(pid uint32, ts uint64) {
	p := a.proc(pid)
	if w := &p.windows[(p.next+len(p.windows)-1)%len(p.windows)]; w.On != 0 && w.Off == 0 {
		w.Off = ts
	}
}

// traced says whether a graph, ended now, is traced, counting it into its window, and
// whether it is the last the newest window traces.
func (p *process) traced(start, end uint64) (traced, fills bool) {
	for i := range p.windows {
		if w := &p.windows[i]; w.covers(start, end) {
			if w.Graphs > 0 && w.traced >= w.Graphs {
				return false, false
			}
			w.traced++
			return true, w.traced == w.Graphs && i == (p.next-1)%len(p.windows)
		}
	}
	return false, false
}

// SplitEnter starts a backend's share of the open decode's graph; device says that
// the backend is not the CPU's.
func (a *Assembler) SplitEnter(pid, tid uint32, ts uint64, backend string, addr uint64, nodes int, device bool) {
	a.proc(pid).split = &Split{TID: tid, Backend: backend, BackendAddr: addr, NNodes: nodes, Start: ts, Device: device}
}

// SplitNode adds node i of the open split, read from its graph.
func (a *Assembler) SplitNode(pid, tid uint32, i int, info *NodeInfo) {
	s := a.proc(pid).split
	if s == nil || s.TID != tid || info == nil || i != len(s.Nodes) {
		return // a lost record leaves the list short, not misnumbered
	}
	s.Nodes = append(s.Nodes, info)
}

// TimedNode adds a node of the open split that the device times, filed under label.
func (a *Assembler) TimedNode(pid, tid uint32, label string, info *NodeInfo) {
	s := a.proc(pid).split
	if s == nil || s.TID != tid || info == nil {
		return
	}
	s.Timed = append(s.Timed, TimedNode{Info: info, Label: label})
}

// DeviceTimes gives the open split's nodes of label their times: the label holds held
// times, the newest of them those of the split's last nodes so labelled, in order; times
// are some of the newest events.TimesKept, from index first among them on.
func (a *Assembler) DeviceTimes(pid, tid uint32, label []byte, held, first int, times []uint64) {
	s := a.proc(pid).split
	if s == nil || s.TID != tid || len(s.Timed) == 0 {
		return
	}
	if s.labels == nil {
		s.labels = map[string][]int{}
		for i, n := range s.Timed {
			s.labels[n.Label] = append(s.labels[n.Label], i)
		}
	}
	nodes := s.labels[string(label)]
	// Time x (of held) is that of node x - (held - len(nodes)); earlier ones are earlier
	// graphs', where the logger prints less often than every graph.
	from := max(held-events.TimesKept, 0) + first - (held - len(nodes))
	for i, ns := range times {
		if j := from + i; j >= 0 && j < len(nodes) {
			n := &s.Timed[nodes[j]]
			n.NS, n.Known = ns, true
		}
	}
}

// backendWait is a wait of the CPU for one backend's queued work.
type backendWait struct {
	tid     uint32
	backend uint64
	start   uint64
}

// SyncEnter starts a wait of the CPU for backend's work.
func (a *Assembler) SyncEnter(pid, tid uint32, ts, backend uint64) {
	a.proc(pid).wait = &backendWait{tid: tid, backend: backend, start: ts}
}

// SyncExit ends the open wait: the backend's splits handed over before it are done.
func (a *Assembler) SyncExit(pid, tid uint32, ts uint64) {
	p := a.proc(pid)
	w := p.wait
	if w == nil || w.tid != tid {
		return
	}
	p.wait = nil
	var last *Split
	for _, d := range [...]*Step{p.held, p.decode} {
		if d == nil {
			continue
		}
		for i := range d.Splits {
			s := &d.Splits[i]
			if s.Device && s.Done == 0 && s.BackendAddr == w.backend && s.End <= w.start {
				s.Done, s.Bound = ts, true
				last = s
			}
		}
	}
	if last != nil {
		last.Wait = ts - w.start
		last.Bound = last.Wait < boundWait
	}
	if p.held != nil && !p.held.running() {
		a.sink.Step(p.held)
		p.held = nil
	}
}

// running says whether a device still computes one of d's splits, as far as seen.
func (d *Step) running() bool {
	for i := range d.Splits {
		if d.Splits[i].Device && d.Splits[i].Done == 0 {
			return true
		}
	}
	return false
}

// SplitExit finishes the open split, as part of the open decode.
func (a *Assembler) SplitExit(pid, tid uint32, ts uint64) {
	p := a.proc(pid)
	if s := p.split; s != nil && s.TID == tid {
		s.End = ts
		s.labels = nil
		p.split = nil
		if p.decode != nil {
			p.decode.Splits = append(p.decode.Splits, *s)
		}
	}
}

// CopyEnter starts a copy between backends; only those of a decode are kept.
func (a *Assembler) CopyEnter(pid uint32, ts uint64, c Copy) {
	c.Start = ts
	a.proc(pid).copy = &c
}

// CopyExit finishes the open copy, as part of the open decode; made says whether it was
// made or queued, rather than left to another copy.
func (a *Assembler) CopyExit(pid, tid uint32, ts uint64, made bool) {
	p := a.proc(pid)
	if c := p.copy; c != nil && c.TID == tid {
		c.End = ts
		p.copy = nil
		if p.decode != nil && made {
			p.decode.Copies = append(p.decode.Copies, *c)
		}
	}
}

// GraphEnter starts a graph computation on the calling thread. A graph still open lost
// its exit.
func (a *Assembler) GraphEnter(pid, tid uint32, ts, ptr uint64, nodes, threads int, cpu events.ThreadsCPU) {
	p := a.proc(pid)
	if p.graph != nil {
		a.Stats.DroppedGraphs++
	}
	p.graph = &Graph{PID: pid, TID: tid, Ptr: ptr, NNodes: nodes, NThreads: threads, Start: ts, cpuEnter: cpu}
	for tid, t := range p.threads {
		*t = thread{tid: tid, ctr: t.ctr}
	}
}

// GraphExit finishes the open graph: each thread's last node ends at its last barrier.
// sched is the calling thread's scheduler counters, cpu the process's threads' CPU time.
// lost is the count of the process's lost records: a graph of a decode goes with its
// decode, whose exit checks it; one outside any decode is dropped whole if it grew since
// the last exit.
func (a *Assembler) GraphExit(pid, tid uint32, ts uint64, sched events.CPUSched, lost uint64, cpu events.ThreadsCPU) {
	p := a.proc(pid)
	g := p.graph
	if g == nil || g.TID != tid {
		return
	}
	if p.decode == nil && lost != p.lost {
		p.lost = lost
		p.graph = nil
		a.Stats.DroppedGraphs++
		return
	}
	for id, t := range p.threads {
		if id == tid {
			a.closeNode(t, ts, &sched, nil)
			continue
		}
		// Another thread's own exit may come a moment later (ggml's threadpool returns
		// without waiting for its workers): its counters can still fill in the node.
		if t.ctr.valid && t.cur != nil {
			t.ctr.late = t.cur
		}
		a.closeNode(t, ts, nil, nil)
	}
	g.End = ts
	g.byTensor = nil
	p.graphCPU(g, cpu, &a.busy)
	g.Traced, g.FillsWindow = p.traced(g.Start, g.End)
	if !g.Traced {
		if len(g.Nodes) > 0 {
			a.Stats.PartialGraphs++
		}
		g.Nodes, g.Outside, g.Routings = nil, nil, nil
	}
	p.graph = nil
	switch {
	case p.decode != nil:
		if p.split == nil { // the split probes are off: the CPU's split is the graph
			p.decode.Splits = append(p.decode.Splits, cpuSplit(g))
		}
		p.decode.Graphs = append(p.decode.Graphs, g)
	case p.settled || !p.decodes:
		a.sink.Graph(g)
	default:
		if p.loose = append(p.loose, g); len(p.loose) >= maxLoose {
			a.settle(p)
		}
	}
}

// maxLoose bounds the graphs a process that decodes holds before its first decode.
const maxLoose = 8

// Steps says that process pid computes its graphs inside steps (llama_decode calls, or
// its runtime's scheduler computations), whose probes are in place: until its first
// step's entry, the graphs it computes outside one are held, as those of a step
// profinfer came in the middle of.
func (a *Assembler) Steps(pid uint32) { a.proc(pid).decodes = true }

// settle delivers the loose graphs p held: no decode was in flight as profinfer came.
func (a *Assembler) settle(p *process) {
	p.settled = true
	for _, g := range p.loose {
		a.sink.Graph(g)
	}
	p.loose = nil
}

// cpuSplit is the split a CPU graph of a decode stands for where no split probe saw it:
// the graph's extent, as a split probe would have seen it a few microseconds wider. The
// split probes are off where the process's scheduler has the CPU's backend alone, until
// they are placed where it has another, and absent where the scheduler inlined the split
// call; the graph probe sees the CPU's graphs alone.
func cpuSplit(g *Graph) Split {
	return Split{TID: g.TID, Backend: backends.CPU, NNodes: g.NNodes, Start: g.Start, End: g.End}
}

// graphCPU sets g.CPU from the threads' CPU time at its exit. A thread that exits meanwhile
// takes its runtime out of the sum, which then may fall: unknown.
func (p *process) graphCPU(g *Graph, exit events.ThreadsCPU, busy *busy) {
	enter := g.cpuEnter
	if enter.Threads == 0 || exit.Threads == 0 || enter.Partial || exit.Partial || exit.Run < enter.Run || exit.Wait < enter.Wait || g.NThreads <= 0 {
		return
	}
	g.CPU = GraphCPU{Known: true, Run: exit.Run - enter.Run, Wait: exit.Wait - enter.Wait, Perturbed: busy.overlaps(g.Start, g.End)}
	if !g.CPU.Perturbed {
		p.recent.add(g.CPU.Run, uint64(g.NThreads)*(g.End-g.Start))
	}
	g.CPU.Starved = p.recent.starved()
}

// NodeStart records that thread ith started computing tensor, with the thread's
// scheduler counters and perf counters (nil if the event had none). tensor2 is the second
// tensor of a fused kernel. info is set on the event that carries the tensor's detail.
func (a *Assembler) NodeStart(pid, tid uint32, ts, tensor, tensor2 uint64, ith int, info *NodeInfo, sched events.CPUSched, ctr *events.Counters) {
	p := a.proc(pid)
	g := p.graph
	if g == nil {
		a.Stats.OrphanEvents++
		return
	}
	t := p.thread(tid)
	outside := t.ctr.outside
	d := t.ctr.read(ctr)
	if t.cur == nil && outside && d != nil {
		g.Outside = append(g.Outside, ThreadCounters{TID: tid, Counters: *d})
	}
	a.closeNode(t, ts, &sched, d)
	// A graph may compute one tensor more than once (llama.cpp's test-backend-ops adds
	// the same node many times): a thread that already started this tensor's node is on
	// its next computation.
	if g.byTensor == nil { // made at the first node: most graphs are computed outside a window
		g.byTensor = make(map[uint64]*Node, g.NNodes)
	}
	n := g.byTensor[tensor]
	var last *Node
	for n != nil && n.startedBy(ith) {
		last, n = n, n.again
	}
	if n == nil {
		n = &Node{Tensor: tensor, Tensor2: tensor2, Start: ts}
		if last == nil {
			g.byTensor[tensor] = n
		} else {
			last.again = n
		}
		g.Nodes = append(g.Nodes, n)
	}
	n.markStarted(ith)
	if info != nil {
		n.Info = info
	}
	t.cur, t.curStart, t.curSched, t.ith, t.lastBarrier = n, ts, sched, ith, 0
}

// Experts gives the node thread tid last started the expert ids it reads: rows of stride
// bytes, one per token of the tokens routed, each starting with the ids of the experts
// used, which is the ids tensor's first dimension (its third source's shape).
func (a *Assembler) Experts(pid, tid uint32, ids uint64, tokens int, rows []byte, stride int) {
	p := a.proc(pid)
	t := p.thread(tid)
	n := t.cur
	if p.graph == nil || n == nil || n.Info == nil || len(n.Info.Srcs) < 3 {
		a.Stats.OrphanEvents++
		return
	}
	for _, r := range p.graph.Routings {
		if r.IDs == ids {
			n.Routing = r
			return
		}
	}
	used := int(n.Info.Srcs[2].Shape[0])
	if used <= 0 || 4*used > stride {
		a.Stats.OrphanEvents++
		return
	}
	r := &Routing{Name: n.Info.Name, IDs: ids, Tokens: tokens, Used: used, Experts: make([]int32, 0, len(rows)/stride*used)}
	if n.Info.Op == "MUL_MAT_ID" {
		r.NExpert = int(n.Info.Srcs[0].Shape[2])
	}
	for row := 0; row+stride <= len(rows); row += stride {
		for j := range used {
			r.Experts = append(r.Experts, int32(binary.LittleEndian.Uint32(rows[row+4*j:])))
		}
	}
	n.Routing = r
	p.graph.Routings = append(p.graph.Routings, r)
}

// ThreadExit records that a thread left the graph (ggml_graph_compute_thread returned),
// with its counters: they end its last node.
func (a *Assembler) ThreadExit(pid, tid uint32, ts uint64, sched events.CPUSched, ctr *events.Counters) {
	p := a.proc(pid)
	t := p.thread(tid)
	late := t.ctr.late
	d := t.ctr.read(ctr)
	switch {
	case t.cur != nil:
		a.closeNode(t, ts, &sched, d)
	case late != nil && d != nil:
		for i := range late.Threads {
			if sh := &late.Threads[i]; sh.TID == tid && !sh.Counted {
				sh.Counted, sh.Counters = true, *d
				late.Counters.Add(*d)
				late.Counted++
			}
		}
	}
	t.ctr.outside = t.ctr.valid
}

func (p *process) thread(tid uint32) *thread {
	t := p.threads[tid]
	if t == nil {
		t = &thread{tid: tid}
		p.threads[tid] = t
	}
	return t
}

// Barrier records that a thread entered ggml_barrier.
func (a *Assembler) Barrier(pid, tid uint32, ts uint64) {
	p := a.procs[pid]
	if p == nil || p.graph == nil {
		a.Stats.OrphanEvents++
		return
	}
	if t := p.threads[tid]; t != nil {
		t.lastBarrier = ts
	}
}

// closeNode ends the thread's current node at ts, its busy part at its last barrier (or
// at ts if it has not reached one). sched is the thread's scheduler counters at ts, ctr
// its perf counter deltas since the node started; nil when unknown.
func (a *Assembler) closeNode(t *thread, ts uint64, sched *events.CPUSched, ctr *events.Counters) {
	n := t.cur
	if n == nil {
		return
	}
	busy := ts
	if t.lastBarrier > t.curStart {
		busy = t.lastBarrier
	}
	share := ThreadTime{TID: t.tid, Ith: t.ith, Start: t.curStart, Busy: busy, End: ts}
	if ctr != nil {
		share.Counted, share.Counters = true, *ctr
		n.Counters.Add(*ctr)
		n.Counted++
	}
	n.Threads = append(n.Threads, share)
	if sched != nil {
		d := sched.Sub(t.curSched)
		n.Sched.OffCPU += d.OffCPU
		n.Sched.RunQueue += d.RunQueue
		n.Sched.Preemptions += d.Preemptions
		n.Sched.Migrations += d.Migrations
	}
	if t.curStart < n.Start {
		n.Start = t.curStart
	}
	if ts > n.End {
		n.End = ts
	}
	t.cur = nil
}

// Exit forgets a process that has exited; what it had in flight is counted as dropped.
func (a *Assembler) Exit(pid uint32) {
	p := a.procs[pid]
	if p == nil {
		return
	}
	if p.graph != nil {
		a.Stats.DroppedGraphs++
	}
	if p.decode != nil {
		a.Stats.DroppedDecode++
		a.Stats.DroppedGraphs += uint64(len(p.decode.Graphs))
	}
	if p.job != nil {
		a.Stats.DroppedJobs++
	}
	a.release(p)
	a.settle(p)
	delete(a.procs, pid)
}
