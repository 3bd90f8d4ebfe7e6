//go:build e2e

package profiler

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Shutdown while the target still runs removes every probe and BPF link profinfer made,
// and unloads its programs: every kind of probe is attached (application, runtime, nodes
// in sampling windows that come and go, barriers, scheduler tracepoints, process hooks),
// and the kernel's link and program lists are compared with those before Start.
func TestShutdownLeavesNoBPF(t *testing.T) {
	requireRoot(t)
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	links, progs := bpfObjects(t)

	cfg := testConfig()
	cfg.Nodes = Nodes{Mode: NodesSampled, Interval: 50 * time.Millisecond, Graphs: 2}
	cfg.Targets = []Selector{{Executable: e.Bin("llama-bench")}}
	p := start(t, ctx, cfg, new(consumertest.TracesSink), new(consumertest.MetricsSink))
	bench, err := testbench.Start(e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 0, 128, 2, 1)...)
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Stop()
	for { // a few windows opened and closed on the running model
		_, _, _, traced := p.readerStats()
		if traced >= 4 {
			break
		}
		if bench.Exited() || ctx.Err() != nil {
			t.Fatalf("llama-bench ended before 4 graphs were traced: %s", bench.Stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	during, _ := bpfObjects(t)
	if len(during) <= len(links) {
		t.Fatalf("%d BPF links while profiling, %d before: the test sees none of profinfer's", len(during), len(links))
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if bench.Exited() {
		t.Fatal("llama-bench ended before the shutdown: the probes were not removed from a live process")
	}
	// Freeing a released link or program is deferred in the kernel (RCU): allow a moment.
	var newLinks, newProgs []uint32
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, pr := bpfObjects(t)
		newLinks, newProgs = added(links, l), added(progs, pr)
		if len(newLinks)+len(newProgs) == 0 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("BPF links: %d before Start, %d while profiling, %d new after Shutdown", len(links), len(during), len(newLinks))
	if len(newLinks)+len(newProgs) > 0 {
		t.Errorf("after Shutdown: %d BPF links %v and %d programs %v that were not there before Start", len(newLinks), newLinks, len(newProgs), newProgs)
	}
}

// bpfObjects lists the IDs of the kernel's BPF links and programs.
func bpfObjects(t *testing.T) (links, progs []uint32) {
	t.Helper()
	it := new(link.Iterator)
	for it.Next() {
		links = append(links, uint32(it.ID))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		progs, id = append(progs, uint32(next)), next
	}
	return links, progs
}

// added returns the IDs in after that are not in before.
func added(before, after []uint32) []uint32 {
	var out []uint32
	for _, id := range after {
		if !slices.Contains(before, id) {
			out = append(out, id)
		}
	}
	return out
}
