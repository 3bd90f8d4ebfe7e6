package viewexporter

import (
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/compare"
)

// A process's side, folding two hours of llama-bench (t2's 6 s replayed, shifted in time
// and with ids of their own), takes what maxSides's comment says: about 2 MB made, 5 MB
// after an hour, and no more after two.
func TestSideMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("folds two hours of spans")
	}
	var bs batches
	read(t, t2, &bs)
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / 1e6
	}
	base := heap()
	s := compare.NewSide("A", compare.Selection{Spec: "all the view saw", PID: 527})
	made := heap() - base
	const every = 6500 * time.Millisecond // t2's steps span 6.2 s
	at := map[int]float64{}
	for loop := range int(2*time.Hour/every) + 1 {
		for _, td := range bs.traces {
			if err := s.Traces(replay(td, loop, every)); err != nil {
				t.Fatal(err)
			}
		}
		for _, md := range bs.metrics {
			if err := s.Metrics(md); err != nil {
				t.Fatal(err)
			}
		}
		if m := int(time.Duration(loop+1) * every / time.Minute); m > 0 && m%60 == 0 && at[m] == 0 {
			at[m] = heap() - base
		}
	}
	t.Logf("a side: %.1f MB made, %.1f MB after an hour, %.1f MB after two", made, at[60], at[120])
	if made > 3 || at[60] > 7 || at[120] > at[60]*1.05 {
		t.Errorf("a side takes %.1f MB made, %.1f MB after an hour, %.1f MB after two", made, at[60], at[120])
	}
	runtime.KeepAlive(s)
}

// replay is td as the loop-th repetition: its spans every later, with ids of their own.
func replay(td ptrace.Traces, loop int, every time.Duration) ptrace.Traces {
	out := ptrace.NewTraces()
	td.CopyTo(out)
	shift := pcommon.Timestamp(int64(loop) * int64(every))
	span := func(id pcommon.SpanID) pcommon.SpanID {
		if !id.IsEmpty() {
			id[0], id[1] = id[0]^byte(loop), id[1]^byte(loop>>8)
		}
		return id
	}
	for i := range out.ResourceSpans().Len() {
		sss := out.ResourceSpans().At(i).ScopeSpans()
		for j := range sss.Len() {
			for k := range sss.At(j).Spans().Len() {
				sp := sss.At(j).Spans().At(k)
				sp.SetStartTimestamp(sp.StartTimestamp() + shift)
				sp.SetEndTimestamp(sp.EndTimestamp() + shift)
				sp.SetSpanID(span(sp.SpanID()))
				sp.SetParentSpanID(span(sp.ParentSpanID()))
				tr := sp.TraceID()
				tr[0], tr[1] = tr[0]^byte(loop), tr[1]^byte(loop>>8)
				sp.SetTraceID(tr)
			}
		}
	}
	return out
}
