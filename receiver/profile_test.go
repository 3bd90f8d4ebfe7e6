//go:build e2e

package receiver

import (
	"cmp"
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
	"github.com/profinfer/profinfer/internal/window"
)

// llama-bench on the 1B Q4_0 model under the ocb-built collector.
func TestE2ELlamaBench(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), "nodes: {mode: all, barriers: true}")
	// -pg: a prompt, then tokens, in one context: the graph is rebuilt for each in the
	// same memory, and reused token after token.
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 32, 16, 2, 1, "-pg", "32,16")...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)
	checkProfile(t, traces, metrics, 16)
	checkShapes(t, traces)
	checkDAG(t, traces)
	checkBenchRequests(t, traces)
	// With the barrier probe every node span splits each thread's busy time from its wait.
	for _, s := range spans(traces) {
		if s.name != "MUL_MAT" {
			continue
		}
		busy, _ := s.attrs["ggml.thread.busy_ns"].([]any)
		if len(busy) != 2 || busy[0].(int64) <= 0 || busy[1].(int64) <= 0 || uint64(busy[0].(int64)) > s.end-s.start {
			t.Fatalf("MUL_MAT span busy time %v over %d ns, want 2 positive shares within it", busy, s.end-s.start)
		}
	}
}

// The default configuration samples: node probes come and go in windows, every traced
// graph is whole, the others carry no nodes, and probes are back to the per-process set
// between windows.
func TestE2ESampledNodes(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), "nodes: {sample_interval: 200ms, sample_graphs: 3}")
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 32, 128, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	graphs := checkProfile(t, traces, metrics, 16)
	slices.SortFunc(graphs, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	traced, run, longest := 0, 0, 0
	for _, g := range graphs {
		if g.attrs["ggml.graph.traced"] != true {
			run = 0
			continue
		}
		traced++
		run++
		longest = max(longest, run)
	}
	// 128 decode graphs at ~20 ms take a few seconds: several windows, never all graphs.
	if traced < 6 || traced >= len(graphs)/2 {
		t.Errorf("%d of %d graphs traced, want at least two windows of 3 and well under half", traced, len(graphs))
	}
	// A window closes as its last graph is read, not at the reader's next tick: its third,
	// or a window brought forward for a phase none traced yet, its window.CatchUpGraphs-th.
	if longest > max(3, window.CatchUpGraphs) {
		t.Errorf("%d graphs traced in a row, want windows of 3 (%d brought forward)", longest, window.CatchUpGraphs)
	}
	checkWalks(t, graphs, spansByID(spans(traces)))
}

// checkWalks checks which graphs (sorted by start) carry their threads' CPU figures: every
// prompt's and every traced one, and a one-token decode's once walkGap has passed since
// the last graph that carried them began, not before. byID finds a graph's decode.
func checkWalks(t *testing.T, graphs []span, byID map[string]span) {
	t.Helper()
	// The probe's clock read and the span's start differ by microseconds: a graph within
	// a millisecond of the gap may go either way.
	const walkGap, slack = 50 * time.Millisecond, time.Millisecond
	var last uint64 // the start of the last walked graph
	walked, skipped := 0, 0
	for i, g := range graphs {
		_, known := g.attrs["ggml.graph.on_cpu_ns"]
		var phase any // its decode's, its nearest ancestor with one
		for p, ok := byID[g.parent]; ok && phase == nil; p, ok = byID[p.parent] {
			phase = p.attrs["llama.phase"]
		}
		must := i == 0 || phase != "decode" || g.attrs["ggml.graph.traced"] == true
		switch since := time.Duration(g.start - last); {
		case known && !must && since < walkGap-slack:
			t.Errorf("decode graph %d walked %v after the last walked one, under %v", i, since, walkGap)
		case !known && (must || since >= walkGap+slack):
			t.Errorf("graph %d (%v, traced %v) not walked, %v after the last walked one: %v", i, phase,
				g.attrs["ggml.graph.traced"], since, g.attrs)
		}
		if known {
			walked, last = walked+1, g.start
		} else {
			skipped++
		}
	}
	t.Logf("%d graphs walked for their threads' CPU, %d not", walked, skipped)
	if skipped == 0 {
		t.Errorf("every one of %d graphs walked: a one-token decode's at 20 ms a token should be walked one in two or three", walked)
	}
}

// The node-llama-cpp prebuilt: CET code, a CPU variant loaded with dlopen, ggml's own
// threadpool barrier.
func TestE2ENodeLlamaCpp(t *testing.T) {
	e := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, node, fullTracing)
	if _, err := testbench.Run(ctx, node, e.NodeArgs("llama-1b-q4_0", 24, 2, 3)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	checkProfile(t, traces, metrics, 16)
	// node-llama-cpp 3.22.1 ships ggml 0.25.1, which says so.
	if v := resourceVersions(traces); len(v) != 1 || v[0] != "0.25.1" {
		t.Errorf("ggml.version on the resources: %q, want 0.25.1", v)
	}
}

// A static llama-server: GGML and llama linked into the executable, found by its own
// symbols; prefill and decode both come through the server's request path.
func TestE2EStaticServer(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.StaticServer(), fullTracing)
	s, err := e.StartServer(ctx, e.StaticServer(), "llama-1b-q4_0", 2, "-lv", "4") // -lv 4: print the model info
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if _, err := s.Complete(ctx, "The quick brown fox jumps over the lazy dog", 16); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	// The static link inlined ggml_backend_graph_compute_async into the scheduler: each
	// graph stands for its split.
	checkProfile(t, traces, metrics, 16)
	checkModel(t, traces, s.Stdout.String()+s.Stderr.String())
}

// ggml fuses RMS_NORM and the MUL by its weight on the CPU (one kernel, one barrier, no
// ggml_cpu_extra_compute_forward): the pair is one node span, RMS_NORM with
// ggml.fused.op MUL, that the readers of the MUL's result link to, as the unfused
// program (GGML_CPU_DISABLE_FUSION=1) has two spans, RMS_NORM and MUL, in the pair's
// place; the graph's other nodes are the same either way.
func TestE2EFusedNodes(t *testing.T) {
	e := testbench.Require(t)
	count := func(fused bool) (pairs, norms, muls, nodes int) {
		t.Helper()
		read := 0
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c := startCollector(t, ctx, e.Bin("llama-bench"), fullTracing)
		name, args := e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 0, 2, 2, 1)
		if !fused {
			name, args = "env", append([]string{"GGML_CPU_DISABLE_FUSION=1", name}, args...)
		}
		if _, err := testbench.Run(ctx, name, args...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		traces, _ := c.stop(t)
		all := spans(traces)
		byID := spansByID(all)
		// One decode graph: the last traced one.
		var g span
		for _, s := range all {
			if s.name == "ggml.graph_compute" && s.attrs["ggml.graph.traced"] == true && s.start > g.start {
				g = s
			}
		}
		for _, s := range all {
			if s.parent != g.id {
				continue
			}
			nodes++
			switch {
			case s.name == "RMS_NORM" && s.attrs["ggml.fused.op"] == "MUL":
				pairs++
			case s.name == "RMS_NORM":
				norms++
			case s.name == "MUL":
				muls++
			}
			for _, l := range s.links { // a reader of a fused pair's MUL links to the pair
				if p := byID[l]; p.parent != g.id {
					t.Errorf("%s links to %s outside its graph", s.name, p.name)
				} else if p.attrs["ggml.fused.op"] == "MUL" {
					read++
				}
			}
		}
		if fused && read < pairs {
			t.Errorf("%d links to the %d fused pairs: the readers of their MULs' results do not link to them", read, pairs)
		}
		return pairs, norms, muls, nodes
	}
	pairs, norms, muls, nodes := count(true)
	_, norms0, muls0, nodes0 := count(false)
	t.Logf("fused: %d pairs, %d RMS_NORM, %d MUL, %d nodes; unfused: %d RMS_NORM, %d MUL, %d nodes", pairs, norms, muls, nodes, norms0, muls0, nodes0)
	if pairs == 0 || norms0 != norms+pairs || muls0 != muls+pairs || nodes0 != nodes+pairs {
		t.Errorf("a fused pair must stand for an RMS_NORM and a MUL of the unfused graph, and nothing else change")
	}
}
