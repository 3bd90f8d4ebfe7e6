package perfcount

import "runtime"

// Thresholds of the counter-based classification. A node whose threads miss the last-level
// cache at least MemoryMPKI times per thousand instructions waits on DRAM; one that
// misses less than ComputeMPKI times and retires at least ComputeIPC instructions per
// cycle keeps its cores busy; anything between is mixed.
const (
	MemoryMPKI  = 5.0
	ComputeMPKI = 1.0
	ComputeIPC  = 1.0
)

// Bound is what the counters say limits a node.
type Bound string

// Bounds.
const (
	Memory  Bound = "memory"
	Compute Bound = "compute"
	Mixed   Bound = "mixed"
)

// Classifier classifies by cycles, instructions and last-level cache misses, when all
// three are counted.
type Classifier struct{ cycles, instructions, misses int }

// llcMisses is the counter of last-level cache misses on each machine: perf's generic
// cache-misses on x86-64, and on arm64, where that one counts L1D refills,
// LL_CACHE_MISS_RD, as ProfInfer reads it.
var llcMisses = map[string]string{"amd64": "cache-misses", "arm64": "ll_cache_miss_rd"}

// NewClassifier finds the three counters in cs; ok is false unless all are there.
func NewClassifier(cs []Counter) (c Classifier, ok bool) { return newClassifier(cs, runtime.GOARCH) }

func newClassifier(cs []Counter, arch string) (c Classifier, ok bool) {
	c = Classifier{-1, -1, -1}
	for i, x := range cs {
		switch x.Name {
		case "cycles":
			c.cycles = i
		case "instructions":
			c.instructions = i
		case llcMisses[arch]:
			c.misses = i
		}
	}
	return c, c.cycles >= 0 && c.instructions >= 0 && c.misses >= 0
}

// Classify returns the bound, instructions per cycle and LLC misses per thousand
// instructions of counter deltas v (in the order of the counters); ok is false when
// there were no cycles or instructions to judge by.
func (c Classifier) Classify(v []uint64) (b Bound, ipc, mpki float64, ok bool) {
	cycles, instr := float64(v[c.cycles]), float64(v[c.instructions])
	if cycles == 0 || instr == 0 {
		return "", 0, 0, false
	}
	ipc, mpki = instr/cycles, 1000*float64(v[c.misses])/instr
	switch {
	case mpki >= MemoryMPKI:
		b = Memory
	case mpki < ComputeMPKI && ipc >= ComputeIPC:
		b = Compute
	default:
		b = Mixed
	}
	return b, ipc, mpki, true
}
