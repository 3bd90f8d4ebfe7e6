package profiler

import (
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/export"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/roofline"
)

// BenchmarkToken is the reader's work for a token of llama-server under the default
// configuration, outside any window: a decode of one token and its one graph assembled,
// counted, made spans and followed for its request, and a second's spans handed over
// every 60 tokens.
func BenchmarkToken(b *testing.B) {
	set := receivertest.NewNopSettings(metadata.Type)
	ctr := export.NewCounters(nil)
	p := &Profiler{cfg: Config{SampleEvery: 1}, log: set.Logger, traces: new(consumertest.TracesSink),
		tracked: map[int]*tracked{}, reqs: requests.New(uint64(requestIdle)), pending: ptrace.NewTraces(), out: make(chan ptrace.Traces, 1),
		spans: export.NewSpans(export.Clock{}, false, roofline.Peaks{}, ctr),
		acc:   export.NewMetrics(metadata.DefaultMetricsBuilderConfig(), set, roofline.Roofs{}, ctr)}
	p.asm = assemble.New(sink{p})
	p.tracked[7] = &tracked{proc: export.Origin{PID: 7, Exe: "/usr/bin/llama-server"}}
	batch := events.Batch{N: 1}
	ts := uint64(1e9)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		batch.Seqs[0] = events.SeqTokens{Tokens: 1, PosMin: int32(i % 1000), PosMax: int32(i % 1000), Outputs: 1}
		p.asm.DecodeEnter(7, 7, ts, 1, 0x1000, &batch)
		p.asm.GraphEnter(7, 7, ts+10_000, 0x2000, 1100, 2, events.ThreadsCPU{Run: ts, Threads: 3})
		p.asm.GraphExit(7, 7, ts+15_000_000, events.CPUSched{}, 0, events.ThreadsCPU{Run: ts + 30_000_000, Threads: 3})
		p.asm.DecodeExit(7, 7, ts+15_100_000, 0, 0)
		ts += 16_000_000
		if i%60 == 59 {
			p.handOver()
			<-p.out
		}
	}
}
