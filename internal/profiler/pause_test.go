//go:build e2e

package profiler

import (
	"context"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/testbench"
)

// Probe attaches never hold up the ring buffer's reader. A busy llama-server on the 1B
// model is sampled in windows of one graph every 50 ms, so that node probes are attached
// and removed several times a second, 20 times at least, while the reader drains the ring: what it spent
// away from it (waiting for what the controller and registry held, or running their
// commands) is logged and bounded, with the most bytes the ring held at a read. With
// uprobe_multi links (Linux 6.6) a window attaches in one system call; without, as on
// the older kernels, in one a probe: before the reader owned ingest, it waited on the
// controller's lock through each of those attaches.
func TestReaderNeverWaitsOnAttach(t *testing.T) {
	requireRoot(t)
	e := testbench.Require(t)
	for _, multi := range []bool{true, false} {
		name := map[bool]string{true: "uprobe_multi", false: "perf_event"}[multi]
		t.Run(name, func(t *testing.T) {
			if !multi {
				probeKernel = func(types *btf.Cache) (probe.Kernel, error) {
					k, err := probe.ProbeKernel(types)
					k.UprobeMulti = false
					return k, err
				}
				defer func() { probeKernel = probe.ProbeKernel }()
			}
			readerPause(t, e, multi)
		})
	}
}

func readerPause(t *testing.T, e *testbench.Env, multi bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cfg := testConfig()
	cfg.Nodes = Nodes{Mode: NodesSampled, Interval: 50 * time.Millisecond, Graphs: 1}
	cfg.Layers.Barriers, cfg.Layers.Scheduler = false, false
	cfg.Targets = []Selector{{PID: srv.PID()}}
	p := start(t, ctx, cfg, new(consumertest.TracesSink), new(consumertest.MetricsSink))
	defer p.Shutdown(ctx)
	if p.bpf.Multi() != multi {
		testbench.Missing(t, "uprobe_multi links (Linux 6.6)")
	}

	const want = 20
	requests := 0
	for _, _, _, windows := p.readerStats(); windows < want; _, _, _, windows = p.readerStats() {
		if _, err := srv.Complete(ctx, "Once upon a time", 32); err != nil {
			t.Fatalf("after %d windows: %v", windows, err)
		}
		requests++
	}
	pause, paused, high, windows := p.readerStats()
	t.Logf("%d requests, %d windows: the reader paused %v in all, %v at most; the ring's high-water mark %d bytes",
		requests, windows, paused, pause, high)
	if paused > 50*time.Millisecond {
		t.Errorf("the reader paused %v in all while windows attached, want 50 ms or less", paused)
	}
}
