package assemble

import (
	"reflect"
	"testing"

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
// a process that exits mid-graph has its decode and graph delivered, cut at its end.
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
	a.NodesOn(7, 1, 0)
	a.GraphEnter(7, 7, 31, 0xa, 2, 1, events.ThreadsCPU{})
	a.NodeStart(7, 7, 32, 0x2, 0, 0, nil, events.CPUSched{}, nil)
	a.Exit(7, 35, 0)
	if a.Stats.DroppedGraphs != 0 || a.Stats.DroppedDecode != 0 || len(s.decodes) != 1 {
		t.Fatalf("stats %+v, %d decodes", a.Stats, len(s.decodes))
	}
	if d := s.decodes[0]; !d.Cut || d.End != 35 || len(d.Graphs) != 1 || !d.Graphs[0].Cut || d.Graphs[0].End != 35 ||
		len(d.Graphs[0].Nodes) != 1 || d.Graphs[0].Nodes[0].End != 35 {
		t.Fatalf("the decode the process ended in: %+v", d)
	}
	// A decode exit with no matching enter (attached mid-call) is ignored.
	a.DecodeExit(7, 7, 40, 0, 0)
	if len(s.decodes) != 1 {
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
	// The process ends in a decode whose last records, its exits among them, were lost
	// in a burst that filled the ring: what it was computing is dropped, not cut.
	a.DecodeEnter(1, 1, 90, 1, 0, nil)
	a.GraphEnter(1, 1, 91, 0xa, 1, 1, events.ThreadsCPU{})
	a.Exit(1, 95, 9)
	if len(s.decodes) != 3 || a.Stats.DroppedDecode != 5 || a.Stats.DroppedGraphs != 6 {
		t.Fatalf("decodes %d, stats %+v", len(s.decodes), a.Stats)
	}
	if d := s.dropped[len(s.dropped)-1]; d.Start != 90 || d.End != 95 || !d.Cut || len(d.Graphs) != 0 {
		t.Fatalf("the decode the process ended in, with records lost: %+v", d)
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

// A decode's graphs know how many KV cells a query of their attention reads at most,
// from its batch's positions.
func TestAttended(t *testing.T) {
	seq := func(id, min, max int32) events.SeqTokens {
		return events.SeqTokens{Seq: id, Tokens: max - min + 1, PosMin: min, PosMax: max}
	}
	for _, tc := range []struct {
		name   string
		batch  events.Batch
		graphs int
		want   float64
	}{
		{"a prompt of 64 in one graph", events.Batch{N: 1, Seqs: [events.MaxSeqs]events.SeqTokens{seq(0, 0, 63)}}, 1, 32.5},
		{"a token at 100", events.Batch{N: 1, Seqs: [events.MaxSeqs]events.SeqTokens{seq(0, 100, 100)}}, 1, 101},
		{"a prompt in two ubatches", events.Batch{N: 1, Seqs: [events.MaxSeqs]events.SeqTokens{seq(0, 0, 1023)}}, 2, 1024},
		{"two sequences", events.Batch{N: 2, Seqs: [events.MaxSeqs]events.SeqTokens{seq(0, 10, 10), seq(1, 40, 40)}}, 1, 41},
		{"truncated", events.Batch{N: 1, Flags: events.BatchTruncated, Seqs: [events.MaxSeqs]events.SeqTokens{seq(0, 0, 9)}}, 1, 0},
	} {
		d := &Step{Kind: LlamaDecode, Batch: tc.batch}
		for range tc.graphs {
			d.Graphs = append(d.Graphs, &Graph{})
		}
		d.attended()
		for _, g := range d.Graphs {
			if g.Cells != tc.want {
				t.Errorf("%s: %g cells, want %g", tc.name, g.Cells, tc.want)
			}
		}
	}
}

// A batch without positions (llama_batch_get_one, as llama-bench and llama-cli make them)
// is placed after what the process's memory holds: known from a clearing of it on.
func TestAttendedWithoutPositions(t *testing.T) {
	s := &sink{}
	a := New(s)
	decode := func(ts uint64, tokens int) float64 {
		b := events.Batch{N: 1, Flags: events.BatchNoPos | events.BatchNoSeq, Seqs: [events.MaxSeqs]events.SeqTokens{{Tokens: int32(tokens), PosMin: -1, PosMax: -1}}}
		a.DecodeEnter(1, 1, ts, tokens, 0, &b)
		a.GraphEnter(1, 1, ts+1, 0xa, 5, 1, events.ThreadsCPU{})
		a.GraphExit(1, 1, ts+2, events.CPUSched{}, 0, events.ThreadsCPU{})
		a.DecodeExit(1, 1, ts+3, 0, 0)
		return s.decodes[len(s.decodes)-1].Graphs[0].Cells
	}
	if c := decode(100, 8); c != 0 {
		t.Errorf("before any clearing: %g cells, want none known", c)
	}
	a.SeqRemoved(1, -1, -1, -1) // llama_memory_clear
	if c := decode(200, 64); c != 32.5 {
		t.Errorf("a prompt of 64 from 0: %g cells, want 32.5", c)
	}
	if c := decode(300, 1); c != 65 {
		t.Errorf("the next token, at 64: %g cells, want 65", c)
	}
	a.SeqRemoved(1, 0, 10, -1) // all from position 10 on
	if c := decode(400, 1); c != 11 {
		t.Errorf("a token at 10: %g cells, want 11", c)
	}
}
