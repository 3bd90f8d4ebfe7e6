package assemble

import (
	"encoding/binary"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/events"
)

type sink struct {
	decodes []*Step
	dropped []*Step // with lost records: their batches and times alone
	graphs  []*Graph
	jobs    []*Job
}

func (s *sink) Step(d *Step) {
	if d.Dropped {
		s.dropped = append(s.dropped, d)
		return
	}
	s.decodes = append(s.decodes, d)
}
func (s *sink) Graph(g *Graph) { s.graphs = append(s.graphs, g) }
func (s *sink) Job(j *Job)     { s.jobs = append(s.jobs, j) }

// Two threads compute three nodes; the matmul calls the barrier internally, and thread 1
// waits at the barriers for thread 0.
func TestDecodeWithTwoThreads(t *testing.T) {
	s := &sink{}
	a := New(s)
	mm := &NodeInfo{Op: "MUL_MAT", Name: "Qcur-0", Type: "f32"}
	add := &NodeInfo{Op: "ADD", Name: "ffn_inp-0", Type: "f32"}
	norm := &NodeInfo{Op: "RMS_NORM", Name: "norm-0", Type: "f32", FusedOp: "MUL"}
	a.NodesOn(1, 50, 0)
	a.DecodeEnter(1, 1, 100, 1, 0, nil)
	a.GraphEnter(1, 1, 110, 0xa, 5, 2, events.ThreadsCPU{})
	// node 0x1 (MUL_MAT): internal barrier at 130/131, done at 150 and 140.
	a.NodeStart(1, 1, 120, 0x1, 0, 0, mm, events.CPUSched{}, nil)
	a.NodeStart(1, 2, 121, 0x1, 0, 1, nil, events.CPUSched{}, nil)
	a.Barrier(1, 1, 130)
	a.Barrier(1, 2, 131)
	a.Barrier(1, 2, 140)
	a.Barrier(1, 1, 150)
	// node 0x2 (ADD).
	a.NodeStart(1, 2, 152, 0x2, 0, 1, nil, events.CPUSched{}, nil)
	a.NodeStart(1, 1, 153, 0x2, 0, 0, add, events.CPUSched{}, nil)
	a.Barrier(1, 1, 160)
	a.Barrier(1, 2, 158)
	// node 0x3 (fused RMS_NORM+MUL), then the final barrier.
	a.NodeStart(1, 1, 161, 0x3, 0, 0, norm, events.CPUSched{}, nil)
	a.NodeStart(1, 2, 162, 0x3, 0, 1, nil, events.CPUSched{}, nil)
	a.Barrier(1, 2, 170)
	a.Barrier(1, 1, 175)
	a.GraphExit(1, 1, 180, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.DecodeExit(1, 1, 190, 0, 0)

	if len(s.decodes) != 1 || len(s.graphs) != 0 {
		t.Fatalf("got %d decodes, %d loose graphs", len(s.decodes), len(s.graphs))
	}
	d := s.decodes[0]
	if d.Tokens != 1 || d.Start != 100 || d.End != 190 || len(d.Graphs) != 1 {
		t.Fatalf("decode %+v", d)
	}
	g := d.Graphs[0]
	if g.Start != 110 || g.End != 180 || g.NNodes != 5 || g.NThreads != 2 || len(g.Nodes) != 3 {
		t.Fatalf("graph %+v", g)
	}
	want := []struct {
		info       *NodeInfo
		start, end uint64
		threads    []ThreadTime
	}{
		{mm, 120, 153, []ThreadTime{{TID: 2, Ith: 1, Start: 121, Busy: 140, End: 152}, {TID: 1, Ith: 0, Start: 120, Busy: 150, End: 153}}},
		{add, 152, 162, []ThreadTime{{TID: 1, Ith: 0, Start: 153, Busy: 160, End: 161}, {TID: 2, Ith: 1, Start: 152, Busy: 158, End: 162}}},
		{norm, 161, 180, nil},
	}
	for i, w := range want {
		n := g.Nodes[i]
		if n.Info != w.info || n.Start != w.start || n.End != w.end {
			t.Errorf("node %d: %s %d..%d, want %s %d..%d", i, n.Info.Op, n.Start, n.End, w.info.Op, w.start, w.end)
		}
		if w.threads != nil && !reflect.DeepEqual(n.Threads, w.threads) {
			t.Errorf("node %d threads %+v, want %+v", i, n.Threads, w.threads)
		}
		if len(n.Threads) != 2 {
			t.Errorf("node %d has %d thread shares", i, len(n.Threads))
		}
	}
}

// A graph outside llama_decode goes to the sink alone; events with no graph are orphans;
// a process that exits mid-graph has its graph counted as dropped.
func TestLooseGraphOrphansAndExit(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.Steps(7)
	a.NodesOn(7, 1, 0)
	a.Barrier(7, 7, 1)
	a.NodeStart(7, 7, 2, 0x1, 0, 0, nil, events.CPUSched{}, nil)
	a.GraphEnter(7, 7, 10, 0xa, 1, 1, events.ThreadsCPU{})
	a.NodeStart(7, 7, 11, 0x1, 0, 0, nil, events.CPUSched{}, nil)
	a.GraphExit(7, 7, 20, events.CPUSched{}, 0, events.ThreadsCPU{}) // no barrier: the node ends at graph exit
	if len(s.graphs) != 0 {
		t.Fatalf("a graph before the first decode went before a decode's entry settled it: %+v", s.graphs)
	}
	a.DecodeEnter(7, 7, 30, 4, 0, nil) // no decode was in flight: the loose graph goes
	if len(s.graphs) != 1 {
		t.Fatalf("%d loose graphs delivered at the first decode's entry, want 1", len(s.graphs))
	}
	if n := s.graphs[0].Nodes[0]; n.End != 20 || n.Threads[0].Busy != 20 {
		t.Fatalf("graphs %+v", s.graphs)
	}
	if a.Stats.OrphanEvents != 2 {
		t.Fatalf("orphans %d", a.Stats.OrphanEvents)
	}
	a.GraphEnter(7, 7, 31, 0xa, 1, 1, events.ThreadsCPU{})
	a.Exit(7)
	if a.Stats.DroppedGraphs != 1 || a.Stats.DroppedDecode != 1 || len(s.decodes) != 0 {
		t.Fatalf("stats %+v", a.Stats)
	}
	// A decode exit with no matching enter (attached mid-call) is ignored.
	a.DecodeExit(7, 7, 40, 0, 0)
	if len(s.decodes) != 0 {
		t.Fatal("decode emitted without an enter")
	}
}

// Attached in the middle of a decode: the graphs of that decode come loose, and go with
// the exit whose entry was never seen; one that computes graphs outside decodes has them
// delivered once maxLoose came.
func TestAttachedMidDecode(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.Steps(7)
	a.Steps(8)
	for i := range uint64(2) { // a prefill's two ubatches
		a.GraphEnter(7, 7, 10+10*i, 0xa, 1, 1, events.ThreadsCPU{})
		a.GraphExit(7, 7, 15+10*i, events.CPUSched{}, 0, events.ThreadsCPU{})
	}
	a.DecodeExit(7, 7, 40, 0, 0)
	a.DecodeEnter(7, 7, 50, 1, 0, nil)
	a.GraphEnter(7, 7, 51, 0xa, 1, 1, events.ThreadsCPU{})
	a.GraphExit(7, 7, 55, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.DecodeExit(7, 7, 56, 0, 0)
	if len(s.graphs) != 0 || len(s.decodes) != 1 || a.Stats.DroppedGraphs != 2 {
		t.Fatalf("%d loose graphs, %d decodes, %d graphs dropped; want the decode alone, its predecessor's 2 graphs dropped", len(s.graphs), len(s.decodes), a.Stats.DroppedGraphs)
	}
	for i := range uint64(maxLoose) { // graphs outside decodes
		a.GraphEnter(8, 8, 10*i, 0xb, 1, 1, events.ThreadsCPU{})
		a.GraphExit(8, 8, 10*i+5, events.CPUSched{}, 0, events.ThreadsCPU{})
	}
	if len(s.graphs) != maxLoose {
		t.Fatalf("%d graphs of a process that never decodes delivered, want %d", len(s.graphs), maxLoose)
	}
}

// Records lost in the ring buffer: whatever they fell into is dropped whole and counted,
// never delivered half built. The exits carry the process's count of lost records.
func TestLostRecords(t *testing.T) {
	s := &sink{}
	a := New(s)
	decode := func(start uint64, lost uint64) {
		a.DecodeEnter(1, 1, start, 1, 0, nil)
		a.GraphEnter(1, 1, start+1, 0xa, 1, 1, events.ThreadsCPU{})
		a.GraphExit(1, 1, start+2, events.CPUSched{}, lost, events.ThreadsCPU{})
		a.DecodeExit(1, 1, start+3, 0, lost)
	}
	decode(10, 0) // nothing lost
	decode(20, 3) // three records lost since: this decode and its graph are dropped
	decode(30, 3) // none since
	if len(s.decodes) != 2 || s.decodes[1].Start != 30 || a.Stats.DroppedDecode != 1 || a.Stats.DroppedGraphs != 1 {
		t.Fatalf("decodes %d, stats %+v", len(s.decodes), a.Stats)
	}
	// The dropped decode still tells its batch's requests when it ran, and nothing else.
	if d := s.dropped; len(d) != 1 || d[0].Start != 20 || d[0].End != 23 || len(d[0].Graphs) != 0 {
		t.Fatalf("dropped decodes %+v", d)
	}
	// A lost graph exit: the graph is dropped when the next one starts, and the decode
	// when its own exit shows the loss.
	a.DecodeEnter(1, 1, 40, 1, 0, nil)
	a.GraphEnter(1, 1, 41, 0xa, 1, 1, events.ThreadsCPU{})
	a.GraphEnter(1, 1, 42, 0xa, 1, 1, events.ThreadsCPU{})
	a.GraphExit(1, 1, 43, events.CPUSched{}, 4, events.ThreadsCPU{})
	a.DecodeExit(1, 1, 44, 0, 4)
	// A lost decode exit: the decode is dropped when the next one starts.
	a.DecodeEnter(1, 1, 50, 1, 0, nil)
	decode(60, 5)
	decode(70, 5)
	if len(s.decodes) != 3 || s.decodes[2].Start != 70 || a.Stats.DroppedDecode != 4 || a.Stats.DroppedGraphs != 4 {
		t.Fatalf("decodes %d, stats %+v", len(s.decodes), a.Stats)
	}
	// A graph outside any decode is checked at its own exit.
	a.GraphEnter(1, 1, 80, 0xb, 1, 1, events.ThreadsCPU{})
	a.GraphExit(1, 1, 81, events.CPUSched{}, 6, events.ThreadsCPU{})
	a.GraphEnter(1, 1, 82, 0xb, 1, 1, events.ThreadsCPU{})
	a.GraphExit(1, 1, 83, events.CPUSched{}, 6, events.ThreadsCPU{})
	if len(s.graphs) != 1 || s.graphs[0].Start != 82 || a.Stats.DroppedGraphs != 5 {
		t.Fatalf("loose graphs %d, stats %+v", len(s.graphs), a.Stats)
	}
}

// Only graphs that a node-tracing window covers whole keep their nodes; the others are
// delivered bare and counted when they had node events.
func TestNodeWindows(t *testing.T) {
	s := &sink{}
	a := New(s)
	graph := func(start, end uint64) *Graph {
		a.GraphEnter(3, 3, start, 0xa, 1, 1, events.ThreadsCPU{})
		a.NodeStart(3, 3, start+1, 0x1, 0, 0, nil, events.CPUSched{}, nil)
		a.GraphExit(3, 3, end, events.CPUSched{}, 0, events.ThreadsCPU{})
		return s.graphs[len(s.graphs)-1]
	}
	if g := graph(10, 20); g.Traced || g.Nodes != nil {
		t.Fatalf("graph before any window: %+v", g)
	}
	a.NodesOn(3, 25, 0)
	if g := graph(30, 40); !g.Traced || len(g.Nodes) != 1 {
		t.Fatalf("graph inside an open window: %+v", g)
	}
	a.NodesOff(3, 45)
	if g := graph(42, 50); g.Traced || g.Nodes != nil {
		t.Fatalf("graph cut by the window's end: %+v", g)
	}
	a.NodesOn(3, 62, 0)
	if g := graph(60, 70); g.Traced || g.Nodes != nil {
		t.Fatalf("graph begun before the window: %+v", g)
	}
	a.NodesOff(3, 90)
	// Events reach user space late: a graph that ended before the window closed is
	// still traced when it is assembled after NodesOff.
	if g := graph(75, 85); !g.Traced || len(g.Nodes) != 1 {
		t.Fatalf("graph inside a closed window: %+v", g)
	}
	// A window of 2 graphs traces the first two that start in it, not a third that
	// ended before the probes came off.
	a.NodesOn(3, 100, 2)
	for i, want := range []bool{true, true, false} {
		start := uint64(110 + 10*i)
		if g := graph(start, start+5); g.Traced != want || g.FillsWindow != (i == 1) {
			t.Fatalf("graph %d of a window of 2: traced %v, fills it %v", i+1, g.Traced, g.FillsWindow)
		}
	}
	a.NodesOff(3, 150)
	if a.Stats.PartialGraphs != 4 {
		t.Fatalf("partial graphs %d, want 4", a.Stats.PartialGraphs)
	}
}

// Expert ids attach to the node the thread just started; a layer's MoE nodes read the same
// ids tensor and share its routing, parsed once: the first Used ids of each row.
func TestExperts(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.NodesOn(3, 1, 0)
	a.GraphEnter(3, 3, 10, 0xa, 3, 1, events.ThreadsCPU{})
	info := &NodeInfo{Op: "MUL_MAT_ID", Srcs: []Src{NewSrc("q4_0", [4]int64{64, 128, 8, 1}), NewSrc("f32", [4]int64{64, 2, 2, 1}), NewSrc("i32", [4]int64{2, 2, 1, 1})}}
	rows := make([]byte, 2*32) // two tokens, 8 experts sorted by the router, 2 used
	for i, e := range []uint32{5, 1, 7, 7, 7, 7, 7, 7, 0, 3, 7, 7, 7, 7, 7, 7} {
		binary.LittleEndian.PutUint32(rows[4*i:], e)
	}
	a.NodeStart(3, 3, 11, 0x1, 0, 0, info, events.CPUSched{}, nil)
	a.Experts(3, 3, 0x1d5, 2, rows, 32)
	a.NodeStart(3, 3, 12, 0x2, 0, 0, info, events.CPUSched{}, nil)
	a.Experts(3, 3, 0x1d5, 2, rows, 32)
	a.Experts(3, 9, 0x1d5, 2, rows, 32) // a thread with no node
	a.GraphExit(3, 3, 20, events.CPUSched{}, 0, events.ThreadsCPU{})
	g := s.graphs[0]
	r := g.Nodes[0].Routing
	if r == nil || len(g.Routings) != 1 || g.Routings[0] != r || r.NExpert != 8 || r.Used != 2 || r.Tokens != 2 || !slices.Equal(r.Experts, []int32{5, 1, 0, 3}) {
		t.Fatalf("routing %+v", r)
	}
	if g.Nodes[1].Routing != r {
		t.Fatalf("second MoE node of the layer has its own routing %+v", g.Nodes[1].Routing)
	}
	if a.Stats.OrphanEvents != 1 {
		t.Fatalf("orphan events %d, want 1", a.Stats.OrphanEvents)
	}
}

// A node's scheduler figures are its threads' counter deltas from start to end, summed;
// a thread whose end has no reading (another thread's graph exit) adds nothing.
func TestNodeSched(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.NodesOn(5, 1, 0)
	a.GraphEnter(5, 1, 10, 0xa, 2, 2, events.ThreadsCPU{})
	a.NodeStart(5, 1, 11, 0x1, 0, 0, nil, events.CPUSched{OffCPU: 100, RunQueue: 50, Preemptions: 1}, nil)
	a.NodeStart(5, 2, 12, 0x1, 0, 1, nil, events.CPUSched{OffCPU: 7}, nil)
	a.NodeStart(5, 1, 20, 0x2, 0, 0, nil, events.CPUSched{OffCPU: 400, RunQueue: 250, Preemptions: 2, Migrations: 1}, nil)
	a.NodeStart(5, 2, 21, 0x2, 0, 1, nil, events.CPUSched{OffCPU: 17}, nil)
	a.GraphExit(5, 1, 30, events.CPUSched{OffCPU: 400, RunQueue: 250, Preemptions: 2, Migrations: 1}, 0, events.ThreadsCPU{})
	g := s.graphs[0]
	if got, want := g.Nodes[0].Sched, (events.CPUSched{OffCPU: 310, RunQueue: 200, Preemptions: 1, Migrations: 1}); got != want {
		t.Errorf("node 1: %+v, want %+v", got, want)
	}
	if got := g.Nodes[1].Sched; got != (events.CPUSched{}) {
		t.Errorf("node 2: %+v, want nothing", got)
	}
}

// Perf counters: each reading closes the thread's interval since its previous one. Two
// graphs on two threads; in the second, thread 2 leaves the graph only after the graph's
// exit (ggml's own threadpool), and still fills in its last node.
func TestCounters(t *testing.T) {
	s := &sink{}
	a := New(s)
	c := func(task uint64) *events.Counters { return &events.Counters{task, task / 10} }
	a.NodesOn(1, 1, 0)
	a.GraphEnter(1, 1, 10, 0xa, 2, 2, events.ThreadsCPU{})
	a.NodeStart(1, 1, 11, 0x1, 0, 0, nil, events.CPUSched{}, c(1000)) // first readings: baselines
	a.NodeStart(1, 2, 12, 0x1, 0, 1, nil, events.CPUSched{}, c(500))
	a.NodeStart(1, 1, 20, 0x2, 0, 0, nil, events.CPUSched{}, c(1800))
	a.NodeStart(1, 2, 21, 0x2, 0, 1, nil, events.CPUSched{}, c(1200))
	a.ThreadExit(1, 2, 28, events.CPUSched{}, c(1900))
	a.ThreadExit(1, 1, 29, events.CPUSched{}, c(2400))
	a.GraphExit(1, 1, 30, events.CPUSched{}, 0, events.ThreadsCPU{})

	a.GraphEnter(1, 1, 40, 0xa, 1, 2, events.ThreadsCPU{})
	a.NodeStart(1, 1, 41, 0x1, 0, 0, nil, events.CPUSched{}, c(2500))
	a.NodeStart(1, 2, 42, 0x1, 0, 1, nil, events.CPUSched{}, c(2000))
	a.ThreadExit(1, 1, 49, events.CPUSched{}, c(3000))
	a.GraphExit(1, 1, 50, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.ThreadExit(1, 2, 51, events.CPUSched{}, c(2700))
	if len(s.graphs) != 2 {
		t.Fatalf("%d graphs", len(s.graphs))
	}
	g1, g2 := s.graphs[0], s.graphs[1]
	want := []events.Counters{{800, 80}, {700, 70}} // node 0x1 on both threads
	for i, th := range g1.Nodes[0].Threads {
		if !th.Counted || th.Counters != want[i] {
			t.Errorf("graph 1 node 0x1 thread %d: %+v", th.TID, th)
		}
	}
	if n := g1.Nodes[0]; n.Counted != 2 || n.Counters != (events.Counters{1500, 150}) {
		t.Errorf("graph 1 node 0x1: %d counted, %v", n.Counted, n.Counters)
	}
	if n := g1.Nodes[1]; n.Counted != 2 || n.Counters != (events.Counters{600 + 700, 60 + 70}) {
		t.Errorf("graph 1 node 0x2 ends at the threads' exits: %d counted, %v", n.Counted, n.Counters)
	}
	if len(g1.Outside) != 0 {
		t.Errorf("graph 1 has time outside nodes before it: %v", g1.Outside)
	}
	wantOut := []ThreadCounters{{1, events.Counters{100, 10}}, {2, events.Counters{100, 10}}}
	if !reflect.DeepEqual(g2.Outside, wantOut) {
		t.Errorf("outside nodes before graph 2: %v, want %v", g2.Outside, wantOut)
	}
	if n := g2.Nodes[0]; n.Counted != 2 || n.Counters != (events.Counters{500 + 700, 50 + 70}) {
		t.Errorf("graph 2 node, thread 2 exiting late: %d counted, %v", n.Counted, n.Counters)
	}

	// A reading without counters breaks the chain: the next interval is not attributed.
	a.GraphEnter(1, 1, 60, 0xa, 1, 1, events.ThreadsCPU{})
	a.NodeStart(1, 1, 61, 0x1, 0, 0, nil, events.CPUSched{}, nil)
	a.ThreadExit(1, 1, 69, events.CPUSched{}, c(4000))
	a.GraphExit(1, 1, 70, events.CPUSched{}, 0, events.ThreadsCPU{})
	if g := s.graphs[2]; g.Nodes[0].Counted != 0 || len(g.Outside) != 0 {
		t.Errorf("uncounted start: node counted %d, outside %v", g.Nodes[0].Counted, g.Outside)
	}
	// A new window starts afresh: the untraced time between is nobody's.
	a.NodesOn(1, 75, 0)
	a.GraphEnter(1, 1, 80, 0xa, 1, 1, events.ThreadsCPU{})
	a.NodeStart(1, 1, 81, 0x1, 0, 0, nil, events.CPUSched{}, c(9000))
	a.ThreadExit(1, 1, 89, events.CPUSched{}, c(9100))
	a.GraphExit(1, 1, 90, events.CPUSched{}, 0, events.ThreadsCPU{})
	if g := s.graphs[3]; len(g.Outside) != 0 || g.Nodes[0].Counters != (events.Counters{100, 10}) {
		t.Errorf("after a new window: outside %v, node %v", g.Outside, g.Nodes[0].Counters)
	}
}

// Splits and copies belong to the decode they ran in; outside one they are not kept.
func TestSplitsAndCopies(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.SplitEnter(1, 1, 5, "CPU", 0xc0, 3, false) // a graph computed outside llama_decode (an RPC server)
	a.SplitExit(1, 1, 6)
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.SplitEnter(1, 1, 12, "CPU", 0xc0, 4, false)
	a.SplitExit(1, 1, 20)
	a.CopyEnter(1, 21, Copy{TID: 1, Src: "CPU", Dst: "RPC", Tensor: "l_out-7", Bytes: 8192})
	a.CopyExit(1, 2, 22, true) // another thread's return: not this copy's
	a.CopyExit(1, 1, 23, true)
	a.SplitEnter(1, 1, 24, "RPC", 0xd0, 5, false)
	a.SplitExit(1, 1, 30)
	a.DecodeExit(1, 1, 32, 0, 0)
	if len(s.decodes) != 1 {
		t.Fatalf("%d decodes", len(s.decodes))
	}
	d := s.decodes[0]
	wantSplits := []Split{{TID: 1, Backend: "CPU", BackendAddr: 0xc0, NNodes: 4, Start: 12, End: 20},
		{TID: 1, Backend: "RPC", BackendAddr: 0xd0, NNodes: 5, Start: 24, End: 30}}
	wantCopies := []Copy{{TID: 1, Src: "CPU", Dst: "RPC", Tensor: "l_out-7", Bytes: 8192, Start: 21, End: 23}}
	if !reflect.DeepEqual(d.Splits, wantSplits) || !reflect.DeepEqual(d.Copies, wantCopies) {
		t.Errorf("decode splits %+v, copies %+v", d.Splits, d.Copies)
	}
}

// Where no split probe saw it (they are off where the scheduler has the CPU alone), each
// CPU graph of a decode is its split, with the graph's extent; a graph outside a decode
// stays loose, and a graph a probed split holds has that split alone.
func TestCPUSplitsFromGraphs(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.GraphEnter(1, 1, 5, 0xa, 7, 2, events.ThreadsCPU{}) // a loose graph
	a.GraphExit(1, 1, 6, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.GraphEnter(1, 1, 12, 0xa, 9, 2, events.ThreadsCPU{})
	a.GraphExit(1, 1, 20, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.DecodeExit(1, 1, 21, 0, 0)
	a.DecodeEnter(1, 1, 30, 1, 0, nil)
	a.SplitEnter(1, 1, 31, "CPU", 0xc0, 9, false)
	a.GraphEnter(1, 1, 32, 0xa, 9, 2, events.ThreadsCPU{})
	a.GraphExit(1, 1, 40, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.SplitExit(1, 1, 41)
	a.DecodeExit(1, 1, 42, 0, 0)
	if len(s.decodes) != 2 || len(s.graphs) != 1 {
		t.Fatalf("%d decodes and %d loose graphs, want 2 and 1", len(s.decodes), len(s.graphs))
	}
	if want := []Split{{TID: 1, Backend: "CPU", NNodes: 9, Start: 12, End: 20}}; !reflect.DeepEqual(s.decodes[0].Splits, want) {
		t.Errorf("the graph's split %+v, want %+v", s.decodes[0].Splits, want)
	}
	if want := []Split{{TID: 1, Backend: "CPU", BackendAddr: 0xc0, NNodes: 9, Start: 31, End: 41}}; !reflect.DeepEqual(s.decodes[1].Splits, want) {
		t.Errorf("with the split probes on, splits %+v, want the probed one %+v", s.decodes[1].Splits, want)
	}
}

// A device's splits end when the CPU's wait for their backend ends, which may be after
// their decode returned: the decode is held until then. Of two splits one wait ends, the
// first's end is a bound; a wait that hardly blocked makes the end a bound too.
func TestDeviceSplits(t *testing.T) {
	s := &sink{}
	a := New(s)
	mm := &NodeInfo{Op: "MUL_MAT", Name: "ffn_up-0"}
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.SplitEnter(1, 1, 11, "VK", 0xa0, 2, true)
	a.SplitNode(1, 1, 0, mm)
	a.SplitNode(1, 1, 2, mm) // the second was lost: not numbered as the second
	a.SplitExit(1, 1, 12)
	a.SplitEnter(1, 1, 13, "CPU", 0xc0, 1, false)
	a.SplitExit(1, 1, 20)
	a.SplitEnter(1, 1, 21, "VK", 0xa0, 3, true)
	a.SplitExit(1, 1, 22)
	a.DecodeExit(1, 1, 23, 0, 0)
	if len(s.decodes) != 0 {
		t.Fatal("a decode whose device splits run was sent")
	}
	a.SyncEnter(1, 1, 30, 0xc0) // the CPU backend's: ends nothing
	a.SyncExit(1, 1, 31)
	a.SyncEnter(1, 1, 40, 0xa0)
	a.SyncExit(1, 1, 90_040)
	if len(s.decodes) != 1 {
		t.Fatalf("%d decodes after the wait", len(s.decodes))
	}
	sp := s.decodes[0].Splits
	if sp[0].Done != 90_040 || !sp[0].Bound || sp[0].Wait != 0 || len(sp[0].Nodes) != 1 {
		t.Errorf("first device split %+v", sp[0])
	}
	if sp[1].Done != 0 || sp[1].Device {
		t.Errorf("CPU split %+v", sp[1])
	}
	if sp[2].Done != 90_040 || sp[2].Bound || sp[2].Wait != 90_000 {
		t.Errorf("last device split %+v", sp[2])
	}

	// Without a wait, the next decode sends the held one as it is.
	a.DecodeEnter(1, 1, 100, 1, 0, nil)
	a.SplitEnter(1, 1, 101, "VK", 0xa0, 3, true)
	a.SplitExit(1, 1, 102)
	a.DecodeExit(1, 1, 103, 0, 0)
	a.DecodeEnter(1, 1, 200, 1, 0, nil)
	if len(s.decodes) != 2 || s.decodes[1].Splits[0].Done != 0 {
		t.Errorf("%d decodes, the held one's split %+v", len(s.decodes), s.decodes[len(s.decodes)-1].Splits)
	}
	a.SyncEnter(1, 1, 201, 0xa0)
	a.SyncExit(1, 1, 205)
	a.DecodeExit(1, 1, 206, 0, 0)
	if len(s.decodes) != 3 {
		t.Errorf("%d decodes: a decode without device splits is sent at its exit", len(s.decodes))
	}
}

// The device's own times, by label: the k-th node of a label gets the label's k-th time
// of this split, counted from the end where the logger holds earlier graphs' too, and a
// node whose time was lost keeps none.
func TestDeviceTimes(t *testing.T) {
	s := &sink{}
	a := New(s)
	mm := &NodeInfo{Op: "MUL_MAT"}
	add := &NodeInfo{Op: "ADD"}
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.SplitEnter(1, 1, 11, "VK", 0xa0, 5, true)
	for _, n := range []struct {
		label string
		info  *NodeInfo
	}{{"mm", mm}, {"add a", add}, {"mm", mm}, {"add b", add}, {"mm", mm}} {
		a.TimedNode(1, 1, n.label, n.info)
	}
	a.TimedNode(1, 2, "mm", mm) // another thread's: not this split's
	// "mm" holds 5 times, 2 of an earlier graph; sent in two records.
	a.DeviceTimes(1, 1, []byte("mm"), 5, 0, []uint64{1, 2, 100})
	a.DeviceTimes(1, 1, []byte("mm"), 5, 3, []uint64{200, 300})
	a.DeviceTimes(1, 1, []byte("add a"), 1, 0, []uint64{50})
	// The record of "add b" was lost.
	a.SplitExit(1, 1, 12)
	a.SyncEnter(1, 1, 13, 0xa0)
	a.SyncExit(1, 1, 14)
	a.DecodeExit(1, 1, 15, 0, 0)
	if len(s.decodes) != 1 {
		t.Fatalf("%d decodes", len(s.decodes))
	}
	got := s.decodes[0].Splits[0].Timed
	want := []struct {
		ns    uint64
		known bool
	}{{100, true}, {50, true}, {200, true}, {0, false}, {300, true}}
	if len(got) != len(want) {
		t.Fatalf("%d timed nodes, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].NS != w.ns || got[i].Known != w.known {
			t.Errorf("node %d: %+v, want %d ns (known %v)", i, got[i], w.ns, w.known)
		}
	}
}

// A graph that computes the same tensor twice (test-backend-ops adds one node many
// times) gives a node per computation, each with its own time.
func TestRepeatedTensor(t *testing.T) {
	s := &sink{}
	a := New(s)
	mm := &NodeInfo{Op: "MUL_MAT", Name: "out", Type: "f32"}
	a.NodesOn(1, 50, 0)
	a.GraphEnter(1, 1, 100, 0xa, 3, 2, events.ThreadsCPU{})
	for i, at := range []uint64{110, 130, 150} {
		a.NodeStart(1, 1, at, 0x1, 0, 0, mm, events.CPUSched{}, nil)
		a.NodeStart(1, 2, at+1, 0x1, 0, 1, nil, events.CPUSched{}, nil)
		a.Barrier(1, 1, at+15)
		a.Barrier(1, 2, at+16+uint64(i))
	}
	a.GraphExit(1, 1, 170, events.CPUSched{}, 0, events.ThreadsCPU{})
	if len(s.graphs) != 1 {
		t.Fatalf("%d graphs", len(s.graphs))
	}
	g := s.graphs[0]
	if len(g.Nodes) != 3 {
		t.Fatalf("%d nodes for 3 computations of one tensor", len(g.Nodes))
	}
	for i, n := range g.Nodes {
		if want := uint64(110 + 20*i); n.Start != want || n.End > want+21 || len(n.Threads) != 2 || n.Info != mm {
			t.Errorf("computation %d: %+v, want a start at %d and both threads", i, n, want)
		}
	}
}

func TestGraphCPU(t *testing.T) {
	s := &sink{}
	a := New(s)
	graph := func(start, end uint64, enter, exit events.ThreadsCPU) GraphCPU {
		a.GraphEnter(1, 1, start, 0xa, 1, 2, enter)
		a.GraphExit(1, 1, end, events.CPUSched{}, 0, exit)
		return s.graphs[len(s.graphs)-1].CPU
	}
	ms := uint64(time.Millisecond)
	cpu := func(run uint64) events.ThreadsCPU { return events.ThreadsCPU{Run: run * ms, Threads: 3} }
	// Two threads for 100 ms, 150 ms of it on a CPU, 40 ms waiting for one: one graph
	// is too little to judge.
	got := graph(0, 100*ms, events.ThreadsCPU{Run: 100 * ms, Wait: 1 * ms, Threads: 3}, events.ThreadsCPU{Run: 250 * ms, Wait: 41 * ms, Threads: 3})
	if want := (GraphCPU{Known: true, Run: 150 * ms, Wait: 40 * ms}); got != want {
		t.Fatalf("first graph %+v, want %+v", got, want)
	}
	// A second one shorter of the CPU: starved, over both (250 of 400 ms).
	if got = graph(100*ms, 200*ms, cpu(250), cpu(350)); !got.Starved || got.Run != 100*ms {
		t.Fatalf("second graph %+v, want starved", got)
	}
	// Then graphs with all of their time: 450 of 600 ms over three is starved, 650 of
	// 800 ms over four is not, nor are the latest four once the first is out of them.
	for i, want := range []bool{true, false, false} {
		at := (200 + 100*uint64(i)) * ms
		if got = graph(at, at+100*ms, cpu(400+200*uint64(i)), cpu(600+200*uint64(i))); got.Starved != want {
			t.Fatalf("graph %d with its CPUs: %+v, want starved %v", i+3, got, want)
		}
	}
	// Tiny graphs: 8 ms of thread time each, too little for a verdict however short.
	b := New(s)
	for i := range uint64(4) {
		b.GraphEnter(2, 2, i*10*ms, 0xa, 1, 2, cpu(i))
		b.GraphExit(2, 2, i*10*ms+4*ms, events.CPUSched{}, 0, cpu(i+1))
		if g := s.graphs[len(s.graphs)-1].CPU; g.Starved || !g.Known {
			t.Fatalf("tiny graph %d: %+v, want known and not starved", i, g)
		}
	}
	// A thread exited, taking its runtime out of the sum; more threads than the probe sums.
	for _, exit := range []events.ThreadsCPU{{Run: 190 * ms, Threads: 2}, {Run: 300 * ms, Threads: 256, Partial: true}} {
		if got = graph(10_120*ms, 10_130*ms, events.ThreadsCPU{Run: 200 * ms, Threads: 3}, exit); got != (GraphCPU{}) {
			t.Fatalf("graph ending with %+v: %+v, want unknown", exit, got)
		}
	}
}

// Graphs that ran while the collector was busy (its attach, a window's probes) are
// marked perturbed and left out of the verdict on the others.
func TestGraphCPUPerturbed(t *testing.T) {
	s := &sink{}
	a := New(s)
	ms := uint64(time.Millisecond)
	cpu := func(run uint64) events.ThreadsCPU { return events.ThreadsCPU{Run: run * ms, Threads: 3} }
	graph := func(start, run uint64) GraphCPU {
		a.GraphEnter(1, 1, start*ms, 0xa, 1, 2, cpu(0))
		a.GraphExit(1, 1, (start+100)*ms, events.CPUSched{}, 0, cpu(run))
		return s.graphs[len(s.graphs)-1].CPU
	}
	a.Busy(50 * ms) // a graph ending in an open span
	if g := graph(0, 100); !g.Perturbed {
		t.Fatalf("graph in an open busy span: %+v", g)
	}
	a.Busy(60 * ms) // nested: the span lasts until both end
	a.Idle(150 * ms)
	a.Idle(170 * ms)
	if g := graph(120, 100); !g.Perturbed || g.Starved {
		t.Fatalf("graph overlapping the span's end: %+v", g)
	}
	// After the span, two with their CPUs, then one without: 420 of 600 ms over the
	// three is starved, the perturbed ones left out.
	if g := graph(200, 190); g.Perturbed || g.Starved {
		t.Fatalf("first graph after: %+v", g)
	}
	if g := graph(300, 190); g.Perturbed || g.Starved {
		t.Fatalf("second graph after: %+v", g)
	}
	a.Idle(400 * ms) // unmatched: ignored
	if g := graph(400, 40); g.Perturbed || !g.Starved {
		t.Fatalf("a graph after an unmatched Idle: %+v", g)
	}
}

// A whisper.cpp transcription: a job holding scheduler computations, each holding its
// graph; a computation of a llama_decode's own is left out; a job's exit sends a step a
// device still computes first.
func TestJobOfSteps(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.Steps(7)
	a.JobEnter(7, 7, 10, 48000, 0xc0)
	embd := &NodeInfo{Op: "GET_ROWS", Srcs: []Src{NewSrc("f16", [4]int64{64, 51865, 1, 1}), NewSrc("i32", [4]int64{4, 1, 1, 1})}}
	for i, head := range []*Head{{Graph: 0xa}, {Graph: 0xb, First: embd}} {
		ts := uint64(20 + 10*i)
		a.StepEnter(7, 7, ts, head)
		a.GraphEnter(7, 7, ts+1, head.Graph, 3, 1, events.ThreadsCPU{})
		a.GraphExit(7, 7, ts+8, events.CPUSched{}, 0, events.ThreadsCPU{})
		a.StepExit(7, 7, ts+9, 0, 0)
	}
	a.JobExit(7, 7, 50, 0, 0)
	if len(s.decodes) != 2 || len(s.jobs) != 1 || len(s.graphs) != 0 {
		t.Fatalf("%d steps, %d jobs, %d loose graphs", len(s.decodes), len(s.jobs), len(s.graphs))
	}
	j := s.jobs[0]
	if j.Samples != 48000 || j.Context != 0xc0 || j.Start != 10 || j.End != 50 || j.Dropped {
		t.Errorf("job %+v", j)
	}
	for i, d := range s.decodes {
		if d.Kind != SchedCompute || d.Job != j || len(d.Graphs) != 1 || d.Graphs[0].Ptr != d.Head.Graph {
			t.Errorf("step %d: %+v", i, d)
		}
	}
	if s.decodes[0].Tokens != 0 || s.decodes[1].Tokens != 4 {
		t.Errorf("tokens %d and %d, want 0 (no rows got) and 4 (the ids' rows)", s.decodes[0].Tokens, s.decodes[1].Tokens)
	}

	// A process probed for both: the computation inside a llama_decode is the decode's.
	a.DecodeEnter(7, 7, 60, 1, 0, nil)
	a.StepEnter(7, 7, 61, &Head{Graph: 0xa})
	a.GraphEnter(7, 7, 62, 0xa, 3, 1, events.ThreadsCPU{})
	a.GraphExit(7, 7, 63, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.StepExit(7, 7, 64, 0, 0)
	a.DecodeExit(7, 7, 65, 0, 0)
	if d := s.decodes[len(s.decodes)-1]; len(s.decodes) != 3 || d.Kind != LlamaDecode || len(d.Graphs) != 1 || d.End != 65 {
		t.Fatalf("%d steps, the last %+v", len(s.decodes), d)
	}

	// Records lost inside a job mark it; one whose exit was lost is counted.
	a.JobEnter(7, 7, 70, 16000, 0xc0)
	a.StepEnter(7, 7, 71, &Head{Graph: 0xa})
	a.StepExit(7, 7, 72, 0, 3)
	a.JobExit(7, 7, 73, 0, 3)
	if j := s.jobs[len(s.jobs)-1]; !j.Dropped || len(s.dropped) != 1 {
		t.Errorf("job with lost records %+v, %d steps dropped", j, len(s.dropped))
	}
	a.JobEnter(7, 7, 80, 16000, 0xc0)
	a.JobEnter(7, 7, 90, 16000, 0xc0)
	if a.Stats.DroppedJobs != 1 {
		t.Errorf("dropped jobs %d, want 1", a.Stats.DroppedJobs)
	}
}
