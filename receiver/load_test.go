//go:build e2e

package receiver

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// A burst far beyond the ring buffer: every node of every graph traced on tiny-dense,
// which llama-bench runs at thousands of tokens a second, into a 16 KiB ring. The kernel
// drops records and profinfer counts them, and every graph that lost any is dropped
// whole, the one llama-bench ends in too (in 5 runs of 12 its last exits were lost):
// each graph span that is emitted has all its nodes, and every span its parent.
// The collector's memory stays under the bound README.md states.
func TestE2ELoad(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Peaks given: the start-up roofline probe's buffers (freed once it is done) would
	// hide the steady state's peak. Above any this machine reaches, so that no node reads
	// above its roof (the harness's check).
	c := startCollector(t, ctx, e.Bin("llama-bench"),
		"nodes: {mode: all}, ring_buffer_size: 16384, roofline: {peak_flops: 1e13, peak_bandwidth: 1e12}")
	res, err := e.Bench(ctx, e.BenchArgs("tiny-dense", 64, 1024, 2, 10)...)
	if err != nil {
		t.Fatal(err)
	}
	hwm := peakRSS(t, c.proc.PID())
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)

	lost, _ := lastSum(metrics, "profinfer.events.dropped")
	received, _ := lastSum(metrics, "profinfer.events.received")
	graphsLost, _ := lastSum(metrics, "profinfer.graphs.dropped")
	all := spans(traces)
	byID := map[string]span{}
	children := map[string]int{}
	for _, s := range all {
		byID[s.id] = s
		children[s.parent]++
	}
	// Graphs of one node count compute the same nodes: the most any of them shows.
	computed := map[int64]int64{}
	var graphs []span
	for _, s := range all {
		if s.parent != "" && s.parent != "0000000000000000" {
			if _, ok := byID[s.parent]; !ok {
				t.Fatalf("span %s has no parent span %s among those emitted", s.name, s.parent)
			}
		}
		if s.name == "ggml.graph_compute" && s.attrs["ggml.graph.traced"] == true {
			graphs = append(graphs, s)
			n := s.attrs["ggml.graph.nodes"].(int64)
			computed[n] = max(computed[n], s.attrs["ggml.graph.nodes.computed"].(int64))
		}
	}
	half := 0
	for _, g := range graphs {
		want := computed[g.attrs["ggml.graph.nodes"].(int64)]
		if got := int64(children[g.id]); got != want || g.attrs["ggml.graph.nodes.computed"] != want {
			half++
			if half <= 3 {
				t.Errorf("graph of %v nodes with %d node spans (computed %v), where others have %d", g.attrs["ggml.graph.nodes"], got, g.attrs["ggml.graph.nodes.computed"], want)
			}
		}
	}
	t.Logf("llama-bench %v t/s; %d records received, %d lost; %d graphs emitted whole, %d dropped, %d half-built; nodes computed by graph size %v; collector peak RSS %d MiB",
		tps(res), received, lost, len(graphs), graphsLost, half, computed, hwm>>20)
	if lost == 0 || graphsLost == 0 {
		t.Errorf("records lost %d, graphs dropped %d: the burst did not overflow the ring, the test proves nothing", lost, graphsLost)
	}
	if len(graphs) == 0 {
		t.Error("no graph came through whole")
	}
	if half > 0 {
		t.Errorf("%d of %d graph spans were emitted without all their nodes", half, len(graphs))
	}
	if hwm > memoryBound {
		t.Errorf("collector peak RSS %d MiB, over the %d MiB README.md states", hwm>>20, memoryBound>>20)
	}
}

// memoryBound is the collector's peak resident memory that README.md states.
const memoryBound = 256 << 20

// peakRSS returns a process's peak resident set size in bytes (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// tps lists llama-bench's results in tokens per second.
func tps(rs []testbench.BenchResult) []int {
	var out []int
	for _, r := range rs {
		out = append(out, int(r.AvgTS))
	}
	return out
}
