//go:build e2e

package profiler

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap/zaptest"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/testbench"
)

func testConfig() Config {
	return Config{
		DiscoveryInterval:  100 * time.Millisecond,
		CollectionInterval: time.Hour,
		Nodes:              Nodes{Mode: NodesAll},
		NodeSpans:          true,
		SampleEvery:        1,
		RingBufferSize:     16 << 20,
		Layers:             probe.Layers{Application: true, Runtime: true, Barriers: true, Scheduler: true},
		Metrics:            metadata.DefaultMetricsBuilderConfig(),
	}
}

// start runs a profiler with cfg, logging to the test, that hands what it assembles to
// traces and metrics.
func start(t *testing.T, ctx context.Context, cfg Config, traces *consumertest.TracesSink, metrics *consumertest.MetricsSink) *Profiler {
	t.Helper()
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zaptest.NewLogger(t)
	p := New(cfg, set, traces, metrics)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root (eBPF)")
	}
}

// The real eBPF against a real llama-bench, targeted by PID: decode and graph spans with
// named nodes arrive, and no event is dropped.
func TestProfileLlamaBench(t *testing.T) {
	requireRoot(t)
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	traces, metrics := new(consumertest.TracesSink), new(consumertest.MetricsSink)
	cfg := testConfig()
	cfg.Targets = []Selector{{Executable: e.Bin("llama-bench")}}
	p := start(t, ctx, cfg, traces, metrics)
	// Discovery attaches while the model loads, before the first decode.
	bench, err := testbench.Start(e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 16, 8, 2, 1)...)
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Stop()
	if err := bench.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, td := range traces.AllTraces() {
		forEachSpan(td, func(s ptrace.Span) { ops[s.Name()]++ })
		// A batch closes at the decode that fills it; one decode is some 300 spans.
		if n := td.SpanCount(); n > maxPending+1024 {
			t.Errorf("a batch of %d spans; the reader hands them over at %d", n, maxPending)
		}
	}
	t.Logf("spans by name: %v", ops)
	if ops["llama_decode"] == 0 || ops["ggml.graph_compute"] == 0 || ops["MUL_MAT"] == 0 {
		t.Fatalf("missing spans: %v", ops)
	}
	if d := p.drops(); d != 0 {
		t.Fatalf("%d events dropped", d)
	}
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		ss := td.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < ss.Len(); j++ {
			spans := ss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(spans.At(k))
			}
		}
	}
}

// Bad targets: with error_mode propagate, Start names the cause; with ignore, the
// profiler starts and still serves a good target.
func TestBadTargets(t *testing.T) {
	requireRoot(t)
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sleeper, err := testbench.Start("sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	defer sleeper.Stop()
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zaptest.NewLogger(t)

	for _, tc := range []struct {
		target Selector
		want   string
	}{
		{Selector{PID: sleeper.PID()}, fmt.Sprintf("pid %d is not a GGML process: it maps no GGML CPU backend", sleeper.PID())},
		{Selector{Executable: "/nonexistent/llama-server"}, "profinfer: target executable /nonexistent/llama-server: lstat /nonexistent: no such file or directory"},
	} {
		cfg := testConfig()
		cfg.Propagate = true
		cfg.Targets = []Selector{tc.target}
		p := New(cfg, set, nil, nil)
		err := p.Start(ctx)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
		_ = p.Shutdown(ctx)
	}

	// ignore: the bad PID is skipped and counted, llama-bench is still profiled.
	cfg := testConfig()
	cfg.Targets = []Selector{{PID: sleeper.PID()}, {Executable: e.Bin("llama-bench")}}
	traces := new(consumertest.TracesSink)
	p := New(cfg, set, traces, nil)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 8, 4, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p.reg.Failures()[metadata.AttributeProfinferAttachReasonOther]; n != 1 {
		t.Errorf("attach failures %v, want 1 other (a process that is not GGML)", p.reg.Failures())
	}
	if traces.SpanCount() == 0 {
		t.Error("no spans from the good target")
	}
	if n := p.ProbesAttached(); n != 0 {
		t.Errorf("%d probes still attached after shutdown", n)
	}
}
