package compare

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/profinfer/profinfer/internal/assemble"
)

// A side's memory does not grow with its input: once its bounds are reached (blocks,
// nodes, the memos, the stems, the summary's own), twice the batches leave it the same
// size. Every node here has a name and a layer of its own, the worst case for the tables.
func TestBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("folds a million spans")
	}
	s := NewSide("A", Selection{Spec: "x.jsonl", Files: []string{"x.jsonl"}})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var at []uint64
	n := 0
	for i := range 8000 {
		var steps []*assemble.Step
		for j := range 32 {
			var specs []spec
			for range 4 {
				n++
				specs = append(specs, spec{op: "MUL_MAT", name: "t" + strconv.Itoa(n) + "-" + strconv.Itoa(n), weight: "q4_0", ns: 1000})
			}
			steps = append(steps, step(1, uint64(1e9+(i*32+j)*100_000), true, 1000, specs...))
		}
		if err := s.Traces(batch(bench, steps...)); err != nil {
			t.Fatal(err)
		}
		if i+1 == 4000 || i+1 == 8000 {
			at = append(at, heap())
		}
	}
	if ph := s.phases["decode"]; ph == nil || ph.steps.n != 8000*32 || len(ph.table.list) > maxIdents+maxOverflow+1 {
		t.Fatalf("the fold lost steps or kept too many nodes: %+v", ph)
	}
	t.Logf("heap after 4000 batches %.1f MB, after 8000 %.1f MB", float64(at[0])/1e6, float64(at[1])/1e6)
	if at[1] > at[0]+at[0]/20 {
		t.Errorf("the side grew from %d to %d bytes with twice the input", at[0], at[1])
	}
}
