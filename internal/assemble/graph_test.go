package assemble

import (
	"encoding/binary"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/events"
)

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

// A process whose graphs each run on new threads (ggml's threadpool made per graph, as
// it is without OpenMP) keeps a bounded set of threads however long it runs: those of
// the graph, and with counters those seen in the latest staleGraphs graphs. A thread of
// every graph keeps its counter chain.
func TestThreadsBounded(t *testing.T) {
	for _, counted := range []bool{false, true} {
		s := &sink{}
		a := New(s)
		a.NodesOn(1, 1, 0) // every graph traced
		var v uint64
		c := func() *events.Counters {
			if !counted {
				return nil
			}
			v += 100
			return &events.Counters{v, v / 10}
		}
		const graphs = 1000
		for g := range uint64(graphs) {
			ts := 100 + 10*g
			worker := uint32(1000 + g) // a new thread each graph
			a.GraphEnter(1, 1, ts, 0xa, 1, 2, events.ThreadsCPU{})
			a.NodeStart(1, 1, ts+1, 0x1, 0, 0, nil, events.CPUSched{}, c())
			a.NodeStart(1, worker, ts+2, 0x1, 0, 1, nil, events.CPUSched{}, c())
			a.ThreadExit(1, worker, ts+7, events.CPUSched{}, c())
			a.ThreadExit(1, 1, ts+8, events.CPUSched{}, c())
			a.GraphExit(1, 1, ts+9, events.CPUSched{}, 0, events.ThreadsCPU{})
		}
		limit := 2
		if counted {
			limit = staleGraphs + 2
		}
		if n := len(a.procs[1].threads); n > limit {
			t.Errorf("counters %v: %d threads kept after %d graphs on new threads, want at most %d", counted, n, graphs, limit)
		}
		if len(s.graphs) != graphs {
			t.Fatalf("counters %v: %d graphs", counted, len(s.graphs))
		}
		if n := s.graphs[graphs-1].Nodes[0]; counted && n.Counted != 2 {
			t.Errorf("the last graph's node: %d threads counted, want 2", n.Counted)
		}
		if counted && len(s.graphs[graphs-1].Outside) != 1 { // thread 1, from its exit of the graph before
			t.Errorf("outside nodes before the last graph: %v, want thread 1's", s.graphs[graphs-1].Outside)
		}
	}
}
