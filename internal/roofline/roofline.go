// Package roofline classifies graph nodes as memory-, compute- or overhead-bound from
// their tensor shapes and types alone: the work a node does (FLOPs) and the bytes it
// moves, over its measured duration, against this machine's peaks. It needs no hardware
// counters, so it works in VMs and containers without a PMU.
package roofline

// Shape is one tensor as the classifier sees it: ne[] and its type's storage, bytes per
// block of Block elements.
type Shape struct {
	Ne         [4]int64
	Block      int64
	BlockBytes int64
}

// Elements is the number of elements.
func (s Shape) Elements() float64 {
	return float64(s.Ne[0]) * float64(s.Ne[1]) * float64(s.Ne[2]) * float64(s.Ne[3])
}

// Bytes is the tensor's size in storage, quantised blocks included.
func (s Shape) Bytes() float64 {
	if s.Block <= 0 {
		return 0
	}
	return s.Elements() * float64(s.BlockBytes) / float64(s.Block)
}

// Cost is the FLOPs of op computing dst from srcs, and the bytes it reads and writes.
// Matrix products count a multiply and an add per inner-product term (2·M·N·K);
// element-wise ops a small constant per element. MUL_MAT_ID reads only the experts that
// its tokens selected, at most all of them, and GET_ROWS only the rows it gathers.
func Cost(op string, dst Shape, srcs []Shape) (flops, bytes float64) {
	bytes = dst.Bytes()
	for _, s := range srcs {
		bytes += s.Bytes()
	}
	switch op {
	case "MUL_MAT", "OUT_PROD":
		if len(srcs) > 0 {
			flops = 2 * float64(srcs[0].Ne[0]) * dst.Elements()
		}
	case "MUL_MAT_ID":
		if len(srcs) > 0 {
			flops = 2 * float64(srcs[0].Ne[0]) * dst.Elements()
			// dst is [rows, experts used, tokens]; src0 holds every expert.
			if experts := float64(srcs[0].Ne[2]); experts > 0 {
				used := min(experts, float64(dst.Ne[1])*float64(dst.Ne[2]))
				bytes -= srcs[0].Bytes() * (1 - used/experts)
			}
		}
	case "GET_ROWS":
		flops = dst.Elements()
		// src0 is the table ([cols, rows, ...]); dst holds the gathered rows, one per id.
		if len(srcs) > 0 {
			if rows := float64(srcs[0].Ne[1]) * float64(srcs[0].Ne[2]) * float64(srcs[0].Ne[3]); rows > 0 {
				gathered := float64(dst.Ne[1]) * float64(dst.Ne[2]) * float64(dst.Ne[3])
				bytes -= srcs[0].Bytes() * (1 - min(gathered/rows, 1))
			}
		}
	case "FLASH_ATTN_EXT":
		// q [D, n_q, heads], k [D, n_kv, kv heads], v [Dv, n_kv, kv heads]: Q·Kᵀ then ·V.
		if len(srcs) >= 3 {
			q, k, v := srcs[0], srcs[1], srcs[2]
			perPair := 2 * float64(q.Ne[0]+v.Ne[0])
			flops = perPair * float64(k.Ne[1]) * float64(q.Ne[1]) * float64(q.Ne[2]) * float64(q.Ne[3])
		}
	default:
		flops = elementwise[op] * dst.Elements()
		if flops == 0 {
			flops = dst.Elements()
		}
	}
	return flops, bytes
}

// elementwise is FLOPs per output element of ops that cost more than one.
var elementwise = map[string]float64{
	"RMS_NORM": 3, "NORM": 5, "SOFT_MAX": 5, "ROPE": 6, "SWIGLU": 6, "GEGLU": 10, "SILU": 4, "GELU": 8,
}

// Peaks are a machine's attainable rates, all cores together.
type Peaks struct {
	FLOPS     float64 // floating-point operations per second
	Bandwidth float64 // bytes per second to and from memory
}

// Bound says what limits a node.
type Bound string

// Bounds.
const (
	Memory   Bound = "memory"
	Compute  Bound = "compute"
	Overhead Bound = "overhead" // far from both roofs: dispatch, synchronisation, tiny tensors
	// Starved: the threads computing the node lacked a CPU for much of its wall time, so
	// that time says more about the machine's other load than about the kernel.
	Starved Bound = "starved"
)

// StarvedBelow is the share of their graphs' wall time under which threads that had a
// CPU were starved: alone on two cores the model's threads read 94-98% (a tick's
// inexactness, the collector's own work at a window's end), and at it a node took a
// quarter longer than it would have alone. A verdict rests on MinGraphs graphs or more,
// of MinThreadSeconds of thread time (threads × wall) or more: one graph may be the one
// that ran beside the collector's attach, and a share is exact to a scheduler tick per
// thread, which some 25 ticks of thread time average out. Every verdict of starved (a
// node's, an op's, a phase's, a finding's) is IsStarved over the graphs it speaks for.
const (
	StarvedBelow     = 0.8
	MinGraphs        = 2
	MinThreadSeconds = 0.1
)

// IsStarved says whether threads that had a CPU for share of the time of graphs graphs,
// threadSeconds of thread time, were starved.
func IsStarved(share float64, graphs int64, threadSeconds float64) bool {
	return graphs >= MinGraphs && threadSeconds >= MinThreadSeconds && share < StarvedBelow
}

// overheadBelow is the fraction of the nearer roof under which a node is overhead-bound.
const overheadBelow = 0.1

// Class is a node's place under the roofline.
type Class struct {
	Bound     Bound
	Fraction  float64 // of the roof that bounds it: bandwidth for memory, FLOP/s otherwise
	FLOPS     float64 // achieved
	Bandwidth float64 // achieved
}

// Classify places a node that did flops and moved bytes in seconds. A node whose
// arithmetic intensity is below the machine's ridge point (peak FLOP/s over peak
// bandwidth) can at best reach the memory roof; above it, the compute roof.
func Classify(flops, bytes, seconds float64, p Peaks) Class {
	if seconds <= 0 || p.FLOPS <= 0 || p.Bandwidth <= 0 {
		return Class{Bound: Overhead}
	}
	c := Class{FLOPS: flops / seconds, Bandwidth: bytes / seconds}
	if bytes > 0 && flops/bytes < p.FLOPS/p.Bandwidth {
		c.Bound, c.Fraction = Memory, c.Bandwidth/p.Bandwidth
	} else {
		c.Bound, c.Fraction = Compute, c.FLOPS/p.FLOPS
	}
	if c.Fraction < overheadBelow {
		c.Bound = Overhead
	}
	return c
}
