package profiler

import (
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/export"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/roofline"
)

// sinkProfiler is a profiler with what its sink needs, and no kernel: spans, metrics,
// requests and a queue of 64 batches for the pipeline; node spans if nodeSpans.
func sinkProfiler(nodeSpans bool) *Profiler {
	set := receivertest.NewNopSettings(metadata.Type)
	ctr := export.NewCounters(nil)
	return &Profiler{cfg: Config{SampleEvery: 1}, log: set.Logger, traces: new(consumertest.TracesSink),
		tracked: map[int]*tracked{}, reqs: requests.New(uint64(requestIdle)), pending: ptrace.NewTraces(), out: make(chan ptrace.Traces, 64),
		spans: export.NewSpans(export.Clock{}, nodeSpans, roofline.Peaks{}, ctr),
		acc:   export.NewMetrics(metadata.DefaultMetricsBuilderConfig(), set, roofline.Roofs{}, ctr)}
}

// While a process's new context is read, its decodes wait, up to maxHeld; past it they
// are exported without waiting, and the release once it is read exports every held one.
// No kernel needed.
func TestHeldDecodesBounded(t *testing.T) {
	p := sinkProfiler(true)
	tr := &tracked{proc: export.Origin{PID: 7, Exe: "/usr/bin/llama-server"}, looking: true}
	p.tracked[7] = tr
	s := sink{p}
	const decodes = maxHeld + 44
	for i := range decodes {
		s.Step(&assemble.Step{PID: 7, TID: 7, Tokens: 1, Start: uint64(10 * i), End: uint64(10*i + 5)})
	}
	if len(tr.held) != maxHeld || p.pending.SpanCount() != decodes-maxHeld {
		t.Fatalf("%d decodes held, %d exported; want %d held, the rest exported", len(tr.held), p.pending.SpanCount(), maxHeld)
	}
	tr.looking = false
	p.release(tr)
	spans := p.pending.SpanCount()
	for len(p.out) > 0 {
		spans += (<-p.out).SpanCount()
	}
	if len(tr.held) != 0 || spans != decodes {
		t.Errorf("released: %d held, %d spans; want none held and %d spans", len(tr.held), spans, decodes)
	}
}
