package signals

import (
	"testing"

	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/roofline"
)

// A process whose threadpool is made per graph has new threads every graph: its
// per-thread counter sums, each a ggml.thread.counter series, stay at maxThreads
// threads, and a thread that stays keeps its sum.
func TestThreadCountersBounded(t *testing.T) {
	c, _ := perfcount.Parse("task-clock")
	m := NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{},
		NewCounters([]perfcount.Counter{c}))
	p := &Origin{PID: 1, Exe: "x"}
	const graphs = 4 * maxThreads
	for i := range graphs {
		n := &assemble.Node{Info: &assemble.NodeInfo{Op: "ADD", Type: "f32"}, Start: 10, End: 20, Counted: 2,
			Counters: events.Counters{30},
			Threads: []assemble.ThreadTime{
				{TID: 7, Counted: true, Counters: events.Counters{10}},                         // the main thread
				{TID: uint32(1000 + i), Ith: 1, Counted: true, Counters: events.Counters{20}}}} // a worker made for the graph
		m.Graph(p, &assemble.Graph{NThreads: 2, Start: 5, End: 25, Traced: true, Nodes: []*assemble.Node{n}})
		if n := len(m.procs[1].threadSeen); n > maxThreads {
			t.Fatalf("after %d graphs, counters of %d threads kept, want at most %d", i+1, n, maxThreads)
		}
	}
	pm := m.procs[1]
	if n := len(pm.threads); n > 2*maxThreads {
		t.Errorf("%d thread counter sums kept, want at most %d", n, 2*maxThreads)
	}
	if got := pm.threads[threadKey{7, metadata.AttributeGgmlScopeNode}]; got == nil || got[0] != 10*graphs {
		t.Errorf("the thread of every graph: %v, want %d", got, 10*graphs)
	}
	if got := pm.threads[threadKey{1000 + graphs - 1, metadata.AttributeGgmlScopeNode}]; got == nil || got[0] != 20 {
		t.Errorf("the latest graph's worker: %v, want 20", got)
	}
	md := m.Emit(Telemetry{})
	series := 0
	rm := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < rm.Len(); i++ {
		if rm.At(i).Name() == "ggml.thread.counter" {
			series = rm.At(i).Sum().DataPoints().Len()
		}
	}
	if series == 0 || series > 2*maxThreads {
		t.Errorf("%d ggml.thread.counter series, want 1 to %d", series, 2*maxThreads)
	}
}

// Expert ids are read from the process's memory: one out of range sizes nothing.
func TestMoEBounded(t *testing.T) {
	m := NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, nil)
	r := &assemble.Routing{Name: "ffn_moe_topk-3", NExpert: 8, Used: 2, Tokens: 1, Experts: []int32{1, 1 << 20}}
	m.Graph(&Origin{PID: 1, Exe: "x"}, &assemble.Graph{Traced: true, Routings: []*assemble.Routing{r}})
	if c := m.procs[1].moe[3]; len(c) != 8 || c[1] != 1 {
		t.Errorf("layer 3 selections %v, want 8 experts, expert 1 once", c)
	}
	r = &assemble.Routing{Name: "", NExpert: 1 << 20, Used: 1, Tokens: 1, Experts: []int32{2}}
	m.Graph(&Origin{PID: 1, Exe: "x"}, &assemble.Graph{Traced: true, Routings: []*assemble.Routing{r}})
	if c := m.procs[1].moe[0]; len(c) > maxExperts {
		t.Errorf("a layer of %d experts counted", len(c))
	}
}
