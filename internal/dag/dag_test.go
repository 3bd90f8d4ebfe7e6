package dag

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
)

func node(tensor uint64, start, end uint64, reads ...uint64) *assemble.Node {
	return &assemble.Node{Tensor: tensor, Start: start, End: end, Info: &assemble.NodeInfo{Reads: reads}}
}

// Two branches from one input join in a matmul; a copy fills a cache that a later node
// reads through a view; a fused kernel writes two tensors.
func TestOf(t *testing.T) {
	const cache, weights = 0xc000, 0xe000
	nodes := []*assemble.Node{
		node(0x10, 0, 10, weights),           // 0: input (reads a leaf only)
		node(0x20, 10, 40, 0x10),             // 1: long branch
		node(0x30, 40, 45, 0x10),             // 2: short branch
		node(0x40, 45, 60, 0x20, 0x30, 0x20), // 3: joins both, 0x20 read twice
		node(0x50, 60, 62, 0x40),             // 4: copy into the cache (writes a view of it)
		node(0x60, 62, 70, cache),            // 5: reads the cache
		{Tensor: 0x70, Tensor2: 0x71, Start: 70, End: 75, Info: &assemble.NodeInfo{Reads: []uint64{0x60}}}, // 6: fused
		node(0x80, 75, 76, 0x71), // 7: reads the fused kernel's second output
	}
	nodes[4].Info.Owner = cache
	d := Of(nodes)
	want := [][]int{nil, {0}, {0}, {1, 2}, {3}, {4}, {5}, {6}}
	for i := range want {
		if !slices.Equal(d.Producers[i], want[i]) {
			t.Errorf("node %d: producers %v, want %v", i, d.Producers[i], want[i])
		}
	}
	nodes[2].End = 47 // overlaps the next node: counted to its start
	if !slices.Equal(d.Critical, []int{0, 1, 3, 4, 5, 6, 7}) || d.Duration != 10+30+15+2+8+5+1 {
		t.Errorf("critical path %v of %d ns", d.Critical, d.Duration)
	}
	if e := Of(nil); e.Critical != nil || e.Duration != 0 {
		t.Errorf("empty graph: %+v", e)
	}
}

func TestDOT(t *testing.T) {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	g := spans.AppendEmpty()
	g.SetName("ggml.graph_compute")
	g.SetSpanID(pcommon.SpanID{1})
	g.Attributes().PutBool("ggml.graph.traced", true)
	g.Attributes().PutInt("ggml.critical_path.duration_ns", 3000)
	g.Attributes().PutDouble("ggml.critical_path.share", 0.5)
	g.SetEndTimestamp(6000)
	for i, name := range []string{"GET_ROWS", "MUL_MAT"} {
		n := spans.AppendEmpty()
		n.SetName(name)
		n.SetSpanID(pcommon.SpanID{2 + byte(i)})
		n.SetParentSpanID(g.SpanID())
		n.SetStartTimestamp(pcommon.Timestamp(1000 * i))
		n.SetEndTimestamp(pcommon.Timestamp(1000*i + 1500))
		n.Attributes().PutStr("ggml.tensor.name", fmt.Sprintf("t%d", i))
		n.Attributes().PutBool("ggml.critical_path", true)
		if i > 0 {
			n.Links().AppendEmpty().SetSpanID(pcommon.SpanID{2})
		}
	}
	var b strings.Builder
	n, err := DOT(&b, []ptrace.Traces{td}, -1)
	out := b.String()
	if err != nil || n != 1 {
		t.Fatalf("%d graphs, %v", n, err)
	}
	for _, want := range []string{
		`label="graph 0: 2 nodes, 6 µs; critical path 3 µs (50%)"`,
		`"0200000000000000" -> "0300000000000000";`,
		`"0300000000000000" [label="MUL_MAT\nt1\n1.5 µs", color=red, penwidth=2];`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT lacks %s:\n%s", want, out)
		}
	}
	if n, _ := DOT(&b, []ptrace.Traces{td}, 1); n != 0 {
		t.Errorf("graph 1 of 1 drawn")
	}
}
