package compare

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/signals"
)

// The recordings the tests compare are built by the receiver's own span builder, so that
// they have the spans' real shape: decode, split, graph, nodes, device work.

var peaks = roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9}

// spec is a node of a synthetic graph: its op, tensor, weights' type, time in ns.
type spec struct {
	op, name, weight string
	ns               uint64
	shape            [4]int64
	fused            string
}

func (s spec) info() *assemble.NodeInfo {
	info := &assemble.NodeInfo{Op: s.op, Name: s.name, Type: "f32", Shape: s.shape, FusedOp: s.fused}
	if info.Shape == [4]int64{} {
		info.Shape = [4]int64{64, 1, 1, 1}
	}
	if s.weight != "" {
		info.Srcs = []assemble.Src{assemble.NewSrc(s.weight, [4]int64{64, 64, 1, 1})}
	}
	return info
}

// step is a decode of tokens from start: one CPU graph running the nodes one after the
// other, traced or not, and gap ns of the decode outside it.
func step(tokens int, start uint64, traced bool, gap uint64, specs ...spec) *assemble.Step {
	t := start + 10
	var nodes []*assemble.Node
	for _, s := range specs {
		nodes = append(nodes, &assemble.Node{Info: s.info(), Start: t, End: t + s.ns})
		t += s.ns
	}
	g := &assemble.Graph{TID: 1, NNodes: len(nodes), NThreads: 2, Start: start + 5, End: t + 5, Traced: traced}
	if traced {
		g.Nodes = nodes
	}
	return &assemble.Step{PID: 1, TID: 1, Tokens: tokens, Start: start, End: t + 5 + gap, Graphs: []*assemble.Graph{g}}
}

// batch is the spans of steps as one export batch of process o.
func batch(o *signals.Origin, steps ...*assemble.Step) ptrace.Traces {
	s := signals.NewSpans(signals.Clock{Offset: 1e18}, true, peaks, nil)
	td := ptrace.NewTraces()
	for _, d := range steps {
		s.Step(td, o, d)
	}
	return td
}

// side folds batches into a side selecting spec.
func side(t *testing.T, name, spec string, batches ...ptrace.Traces) *Side {
	t.Helper()
	sel, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSide(name, sel)
	for _, td := range batches {
		if err := s.Traces(td); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

var bench = &signals.Origin{PID: 11, VPID: 11, Exe: "/usr/bin/llama-bench", Runtime: "llama.cpp", CtxThreads: 2}

// layers is a decode graph of n layers: per layer, a matmul on weights of type w taking
// mm ns and an ADD taking 20 µs.
func layers(n int, w string, mm uint64) []spec {
	var out []spec
	for l := range n {
		out = append(out, spec{op: "MUL_MAT", name: "ffn_up-" + strconv.Itoa(l), weight: w, ns: mm},
			spec{op: "ADD", name: "ffn_out-" + strconv.Itoa(l), ns: 20_000})
	}
	return out
}

// run is steps decodes of one token in batches of 8, their nodes' times and gaps drawn
// around the specs' with a spread of ±spread, and a drift over the run.
func run(o *signals.Origin, seed uint64, steps int, spread float64, graph func(i int) []spec) []ptrace.Traces {
	rng := rand.New(rand.NewPCG(seed, seed))
	jitter := func(ns uint64) uint64 { return uint64(float64(ns) * (1 + spread*(2*rng.Float64()-1))) }
	var out []ptrace.Traces
	var pending []*assemble.Step
	t := uint64(1e9)
	for i := range steps {
		specs := graph(i)
		for j := range specs {
			specs[j].ns = jitter(specs[j].ns)
		}
		d := step(1, t, true, jitter(200_000), specs...)
		pending = append(pending, d)
		t = d.End + 50_000
		if len(pending) == 8 || i == steps-1 {
			out = append(out, batch(o, pending...))
			pending = nil
		}
	}
	return out
}
