package assemble

import (
	"encoding/binary"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/events"
)

// GraphEnter starts a graph computation on the calling thread. A graph still open lost
// its exit.
func (a *Assembler) GraphEnter(pid, tid uint32, ts, ptr uint64, nodes, threads int, cpu events.ThreadsCPU) {
	p := a.proc(pid)
	if p.graph != nil {
		a.Stats.DroppedGraphs++
	}
	p.graph = &Graph{PID: pid, TID: tid, Ptr: ptr, NNodes: nodes, NThreads: threads, Start: ts, cpuEnter: cpu}
	p.graphs++
	for tid, t := range p.threads {
		// A thread is kept from graph to graph for its counter readings alone: one
		// without any is as good as new, and one not seen for staleGraphs graphs has
		// likely exited (a threadpool made per graph, as ggml's is without OpenMP, has
		// new threads every graph). The process's threads then stay bounded, however long
		// it runs.
		if !t.ctr.valid || p.graphs-t.seen > staleGraphs {
			delete(p.threads, tid)
			continue
		}
		*t = thread{tid: tid, ctr: t.ctr, seen: t.seen}
	}
}

// staleGraphs is how many graphs a thread's counter readings are kept across without an
// event of the thread: past it, its next reading starts a new chain.
const staleGraphs = 16

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
	a.keepNodes(p, g)
	p.graph = nil
	a.place(p, g)
}

// keepNodes keeps g's nodes where a window traced it whole.
func (a *Assembler) keepNodes(p *process, g *Graph) {
	g.Traced, g.FillsWindow = p.traced(g.Start, g.End)
	if !g.Traced {
		if len(g.Nodes) > 0 {
			a.Stats.PartialGraphs++
		}
		g.Nodes, g.Outside, g.Routings = nil, nil, nil
	}
}

// place puts a finished graph in its step, delivers it, or holds it as loose.
func (a *Assembler) place(p *process, g *Graph) {
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
	if enter.Threads == 0 || exit.Threads == 0 || enter.Partial || exit.Partial || exit.Run < enter.Run || exit.Wait < enter.Wait ||
		exit.MajFlt < enter.MajFlt || g.NThreads <= 0 {
		return
	}
	g.CPU = GraphCPU{Known: true, Run: exit.Run - enter.Run, Wait: exit.Wait - enter.Wait, MajFlt: exit.MajFlt - enter.MajFlt,
		Perturbed: busy.overlaps(g.Start, g.End)}
	if !g.CPU.Perturbed {
		p.recent.add(g.CPU.Run, uint64(g.NThreads)*(g.End-g.Start), g.End-g.Start)
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
	t.seen = p.graphs
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
