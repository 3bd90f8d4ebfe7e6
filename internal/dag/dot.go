package dag

import (
	"fmt"
	"io"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
)

// DOT writes the traced graphs among the spans of traces as Graphviz digraphs, one per
// graph: a box per node span with its op, tensor and duration, an edge from each
// producer, the critical path in red. which selects one graph by its position among the
// traced ones (negative: all of them). It returns how many graphs it wrote.
func DOT(w io.Writer, traces []ptrace.Traces, which int) (int, error) {
	type graph struct {
		span  ptrace.Span
		nodes []ptrace.Span
	}
	var graphs []*graph
	byID := map[string]*graph{}
	forEach(traces, func(s ptrace.Span) {
		if v, ok := s.Attributes().Get(schema.GGMLGraphTraced); s.Name() == schema.SpanGraph && ok && v.Bool() {
			g := &graph{span: s}
			graphs = append(graphs, g)
			byID[s.SpanID().String()] = g
		}
	})
	forEach(traces, func(s ptrace.Span) {
		if g := byID[s.ParentSpanID().String()]; g != nil {
			g.nodes = append(g.nodes, s)
		}
	})
	n := 0
	for i, g := range graphs {
		if which >= 0 && i != which {
			continue
		}
		var b strings.Builder
		dur := func(s ptrace.Span) float64 { return float64(s.EndTimestamp()-s.StartTimestamp()) / 1e3 }
		fmt.Fprintf(&b, "digraph \"graph %d\" {\n  label=%q;\n  node [shape=box, fontname=monospace];\n", i,
			fmt.Sprintf("graph %d: %d nodes, %.0f µs%s", i, len(g.nodes), dur(g.span), critical(g.span)))
		for _, s := range g.nodes {
			name, _ := s.Attributes().Get(schema.GGMLTensorName)
			color := ""
			if v, ok := s.Attributes().Get(schema.GGMLCriticalPath); ok && v.Bool() {
				color = ", color=red, penwidth=2"
			}
			fmt.Fprintf(&b, "  %q [label=%q%s];\n", s.SpanID().String(),
				fmt.Sprintf("%s\n%s\n%.1f µs", s.Name(), name.AsString(), dur(s)), color)
			for j := 0; j < s.Links().Len(); j++ {
				fmt.Fprintf(&b, "  %q -> %q;\n", s.Links().At(j).SpanID().String(), s.SpanID().String())
			}
		}
		b.WriteString("}\n")
		if _, err := io.WriteString(w, b.String()); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// critical describes a graph span's critical path for its label.
func critical(g ptrace.Span) string {
	d, ok := g.Attributes().Get(schema.GGMLCriticalPathDurationNS)
	share, _ := g.Attributes().Get(schema.GGMLCriticalPathShare)
	if !ok {
		return ""
	}
	return fmt.Sprintf("; critical path %.0f µs (%.0f%%)", float64(d.Int())/1e3, 100*share.Double())
}

func forEach(traces []ptrace.Traces, f func(ptrace.Span)) {
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			ss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				for k := 0; k < ss.At(j).Spans().Len(); k++ {
					f(ss.At(j).Spans().At(k))
				}
			}
		}
	}
}
