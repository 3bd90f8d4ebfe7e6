package compare

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sampleOf is a phase of n one-token steps whose times are drawn by draw, each traced,
// as the fold sums them, with two rows: the graph's one node, all of it, and the graph.
func sampleOf(n int, draw func(i int) float64) *sample {
	ph := &phaseFold{}
	node := ph.table.id(idKey{kind: kindNode, op: "MUL_MAT", layer: -1})
	graph := ph.table.id(idKey{kind: kindGraph, backend: "CPU", layer: -1})
	for i := range n {
		b := ph.steps.at(ph.steps.next())
		g := ph.graphs.at(ph.graphs.next())
		b.tokens++
		b.steps++
		g.tokens++
		g.steps++
		d := draw(i)
		b.seconds += d
		b.add(graph, d)
		g.seconds += d
		g.add(node, d)
	}
	groups := []*group{{a: []int32{node}, b: []int32{node}}, {a: []int32{graph}, b: []int32{graph}}}
	return newSample(ph, groups, true, true)
}

// The verdict on known distributions: the same one, twice, is no change; a shift of half
// the time is one; a shift under the floor is none, however sure.
func TestBootstrapVerdicts(t *testing.T) {
	normal := func(seed uint64, mean, sd float64) func(int) float64 {
		rng := rand.New(rand.NewPCG(seed, 7))
		return func(int) float64 { return mean + sd*rng.NormFloat64() }
	}
	for _, tc := range []struct {
		name   string
		a, b   func(int) float64
		beyond bool
	}{
		{"same", normal(1, 10e-3, 1.5e-3), normal(2, 10e-3, 1.5e-3), false},
		{"half slower", normal(1, 10e-3, 1.5e-3), normal(2, 15e-3, 1.5e-3), true},
		{"half faster", normal(1, 10e-3, 1.5e-3), normal(2, 5e-3, 1.5e-3), true},
		{"under the floor", normal(1, 10e-3, 0.1e-3), normal(2, 10.8e-3, 0.1e-3), false},
	} {
		a, b := sampleOf(1000, tc.a), sampleOf(1000, tc.b)
		total, rel, rows := bootstrap(a, b, 2000)
		va, vb := make([]float64, 4), make([]float64, 4)
		a.estimate(nil, nil, va)
		b.estimate(nil, nil, vb)
		if got := beyond(total, DefaultFloor("decode")*max(va[0], vb[0])); got != tc.beyond {
			t.Errorf("%s: beyond %v, want %v; change %+v, relative %+v", tc.name, got, tc.beyond, total, rel)
		}
		if total.Low > total.Value || total.High < total.Value || rel.Low > rel.Value || rel.High < rel.Value {
			t.Errorf("%s: the interval misses its point: %+v, %+v", tc.name, total, rel)
		}
		// The node holds all the time: the graph outside it and the rest are nothing.
		if math.Abs(rows[1].Value-total.Value) > 1e-12 || math.Abs(rows[2].Value) > 1e-12 || math.Abs(rows[3].Value) > 1e-12 {
			t.Errorf("%s: rows %+v", tc.name, rows)
		}
	}
}

// Blocks merge pairwise as steps come, keeping the time order and every sum.
func TestSeries(t *testing.T) {
	var s series
	for i := range 1000 {
		n := s.next()
		b := s.at(n)
		b.steps++
		b.seconds += float64(i)
		b.add(int32(i%3), 1)
	}
	if len(s.blocks) < maxBlocks/2 || len(s.blocks) > maxBlocks || s.size != 16 {
		t.Fatalf("%d blocks of %d steps", len(s.blocks), s.size)
	}
	var steps int64
	var secs, cells float64
	prev := -1.0
	for _, b := range s.blocks {
		steps += b.steps
		secs += b.seconds
		for _, c := range b.cells {
			cells += c
		}
		if mean := b.seconds / float64(b.steps); mean <= prev {
			t.Errorf("blocks out of order: mean %v after %v", mean, prev)
		} else {
			prev = mean
		}
	}
	if steps != 1000 || secs != 999*1000/2 || cells != 1000 {
		t.Errorf("sums: %d steps, %v s, %v cells", steps, secs, cells)
	}
}

// A run that drifts has a wider interval than the same steps in no order: blocks keep
// neighbours together, so the drift is in their spread.
func TestBlocksKeepDrift(t *testing.T) {
	drift := func(i int) float64 { return 8e-3 + 4e-3*float64(i)/1000 }
	perm := rand.New(rand.NewPCG(3, 3)).Perm(1000)
	flat := sampleOf(1000, func(int) float64 { return 10e-3 })
	width := func(a *sample) float64 {
		total, _, _ := bootstrap(a, flat, 2000)
		return total.High - total.Low
	}
	ordered, shuffled := width(sampleOf(1000, drift)), width(sampleOf(1000, func(i int) float64 { return drift(perm[i]) }))
	if ordered < 3*shuffled {
		t.Errorf("interval %.3g ms drifting, %.3g ms shuffled: want the drift's wider", ordered*1e3, shuffled*1e3)
	}
}
