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
	"github.com/profinfer/profinfer/internal/events"
)

type thread struct {
	tid         uint32
	cur         *Node
	curStart    uint64
	curSched    events.CPUSched
	ith         int
	lastBarrier uint64
	ctr         counting // kept from graph to graph
	seen        uint64   // the process's graph count at the thread's latest event
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
	// nextPos is the position llama_decode gives the first token of a batch without
	// positions (it places them after sequence 0's last), known from a clearing of the
	// memory on; -1 until then.
	nextPos int32
	job     *Job // the open job
	split   *Split
	// held is the last decode, kept from the sink while a device computes its splits:
	// the CPU's wait for them ends them, or the next decode sends it as it is.
	held    *Step
	wait    *backendWait
	copy    *Copy
	graph   *Graph
	threads map[uint32]*thread // those met since the graph began, or with counter readings to keep
	graphs  uint64             // graphs entered
	windows [4]window          // the latest node-tracing windows, newest at windows[next-1]
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
		p = &process{threads: map[uint32]*thread{}, nextPos: -1}
		a.procs[pid] = p
	}
	return p
}

// DecodeEnter starts a llama_decode of tokens tokens. A step still open lost its exit.
func (a *Assembler) DecodeEnter(pid, tid uint32, ts uint64, tokens int, ctx uint64, batch *events.Batch) {
	p := a.enter(pid)
	p.decode = &Step{PID: pid, TID: tid, Tokens: tokens, Context: ctx, Start: ts, Job: p.job, implied: -1}
	if batch != nil {
		p.decode.Batch = *batch
		if batch.Flags&events.BatchNoPos != 0 && p.nextPos >= 0 {
			p.decode.implied = p.nextPos
			p.nextPos += int32(tokens)
		}
	}
}

// SeqRemoved says that process pid removed positions [p0, p1) of sequence seq from its
// memory (-1: every sequence, every position from p0, every one before p1): llama_decode
// places a batch without positions after what remains.
func (a *Assembler) SeqRemoved(pid uint32, seq, p0, p1 int32) {
	p := a.proc(pid)
	if seq > 0 {
		return
	}
	p0 = max(p0, 0)
	switch {
	case p.nextPos < 0 && p0 == 0 && p1 < 0: // the whole sequence: its next position is known
		p.nextPos = 0
	case p.nextPos >= 0 && (p1 < 0 || p1 >= p.nextPos):
		p.nextPos = min(p.nextPos, p0)
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
		a.dropStep(d, ts, result)
		return
	}
	d.End, d.Result = ts, result
	d.attended()
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

// dropStep counts step d dropped, for records of it were lost, and delivers it ended at
// ts with nothing below it: its batch is whole, and the requests it carried still need it.
// A step the process ended inside stays Cut.
func (a *Assembler) dropStep(d *Step, ts uint64, result int) {
	a.dropDecode(d)
	*d = Step{Kind: d.Kind, PID: d.PID, TID: d.TID, Tokens: d.Tokens, Context: d.Context, Batch: d.Batch, Head: d.Head,
		Job: d.Job, Start: d.Start, End: ts, Result: result, Dropped: true, Cut: d.Cut}
	a.sink.Step(d)
}

// Exit forgets a process that ended (exited, or replaced its image) at ts, once it has
// delivered what the process computed: the graph in progress, its nodes closed at ts,
// and the step in progress, both marked Cut; the decode a device computed; the graphs
// held before a first step. A job in progress is counted dropped. lost is the count of
// the process's lost records at its end: where it grew since the last exit, what was in
// progress lost some of its records (its exit, in a burst that filled the ring as the
// process ended, or some of its nodes) and is dropped as an exit would drop it.
func (a *Assembler) Exit(pid uint32, ts, lost uint64) {
	p := a.procs[pid]
	if p == nil {
		return
	}
	if lost != p.lost {
		if p.graph != nil {
			p.graph = nil
			a.Stats.DroppedGraphs++
		}
		if d := p.decode; d != nil {
			p.decode = nil
			d.Cut = true
			a.dropStep(d, ts, 0)
		}
	}
	if g := p.graph; g != nil {
		for _, t := range p.threads {
			a.closeNode(t, ts, nil, nil)
		}
		g.End, g.Cut, g.byTensor = ts, true, nil
		a.keepNodes(p, g)
		p.graph = nil
		a.place(p, g)
	}
	a.release(p)
	if d := p.decode; d != nil {
		p.decode = nil
		d.End, d.Cut = ts, true
		a.sink.Step(d)
	}
	if p.job != nil {
		a.Stats.DroppedJobs++
	}
	a.settle(p)
	delete(a.procs, pid)
}

// attended sets the Cells of d's graphs: how many KV cells a query of their attention
// reads at most. Causal attention reads a query's cells up to its own position, and
// ggml's kernel skips the rest of the window, masked (its padding, and other sequences'
// cells): a graph of one sequence's whole batch reads on average the middle of its
// positions, and any graph at most the batch's last position. A batch without positions
// has those its process's memory implies, where known (SeqRemoved).
func (d *Step) attended() {
	b := &d.Batch
	if d.Kind != LlamaDecode || b.N == 0 || b.Flags&(events.BatchTruncated|events.BatchMoreSeqs) != 0 {
		return
	}
	first, last := b.Seqs[0].PosMin, int32(-1)
	for _, s := range b.Sequences() {
		last = max(last, s.PosMax)
	}
	if b.Flags&events.BatchNoPos != 0 { // placed after what sequence 0 held
		if d.implied < 0 {
			return
		}
		first, last = d.implied, d.implied+int32(d.Tokens)-1
	}
	cells := float64(last) + 1
	if b.N == 1 && len(d.Graphs) == 1 {
		cells = float64(first+last)/2 + 1
	}
	for _, g := range d.Graphs {
		g.Cells = cells
	}
}
