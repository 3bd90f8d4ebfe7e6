package perfetto

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/signals"
)

type counting int64

func (c *counting) Write(p []byte) (int, error) { *c += counting(len(p)); return len(p), nil }

// BenchmarkWriter converts a batch of one decode with a traced graph of 300 nodes, as
// profinfer exports it with the roofline, perf counters and barrier probe on. MB/s is of
// the document written; input-MB/s of the batch as OTLP JSON, as the file exporter
// writes it.
func BenchmarkWriter(b *testing.B) {
	s := signals.NewSpans(signals.Clock{Offset: epoch}, true, roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9}, counters(b))
	td := ptrace.NewTraces()
	s.Step(td, &signals.Origin{PID: serverPID, Exe: "/usr/bin/llama-server", Model: &model.Info{Name: "tiny"}}, decode(1e9, 300))
	in, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	var out counting
	w := NewWriter(&out)
	if err := w.Traces(td); err != nil { // names the tracks
		b.Fatal(err)
	}
	out = 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Traces(td); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.SetBytes(int64(out) / int64(b.N))
	b.ReportMetric(float64(len(in))*float64(b.N)/b.Elapsed().Seconds()/1e6, "input-MB/s")
}
