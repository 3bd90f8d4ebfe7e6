// Package roofline classifies graph nodes as memory-, compute- or overhead-bound from
// their tensor shapes and types alone: the work a node does (FLOPs) and the bytes it
// moves, over its measured duration, against this machine's peaks. It needs no hardware
// counters, so it works in VMs and containers without a PMU.
package roofline

// Shape is one tensor as the classifier sees it: ne[] and its type's storage, bytes per
// block of Block elements, and the type's name (e.g. q4_0, bf16).
type Shape struct {
	Ne         [4]int64
	Block      int64
	BlockBytes int64
	Type       string
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

// Work is what a node does, from its shapes and types.
type Work struct {
	FLOPs float64 // floating-point, or for a quantised matmul int8, operations
	Bytes float64 // read and written
	// Kept is the part of Bytes read from tensors kept across graphs, a matrix product's
	// weights (or KV cache): not made by the graph's earlier nodes, so in cache only if
	// everything a graph keeps fits there. Attention's K and V are not counted in it:
	// their bytes are the whole KV window, of which ggml skips the masked positions (in
	// a short context most of it), so only the level that holds them bounds their rate.
	Kept   float64
	Kernel Kernel
	// Window is the KV cells each query of an attention is charged with, the whole
	// window, and KV the bytes of its K and V: ggml skips the masked cells, so Attending
	// scales both to the cells read.
	Window, KV float64
}

// Attending is w for an attention whose queries read at most cells of its KV window
// each: its FLOPs and its K and V bytes in proportion. Other work is w. An attention
// whose cells are not known (0) has work not known: false.
func (w Work) Attending(cells float64) (Work, bool) {
	switch {
	case w.Window <= 0 || cells >= w.Window:
		return w, true
	case cells <= 0:
		return w, false
	}
	f := cells / w.Window
	w.FLOPs *= f
	w.Bytes -= w.KV * (1 - f)
	w.KV *= f
	return w, true
}

// Kernel is the class of kernel a node runs, which decides its compute roof.
type Kernel uint8

// Kernel classes.
const (
	FMA Kernel = iota // fp32 fused multiply-adds: every op but these matrix products
	// Int8: a matrix product of quantised weights, which ggml's CPU kernels multiply as
	// int8 dot products against activations quantised to 8 bits.
	Int8
	// BF16: a matrix product of bf16 weights, multiplied as bf16 dot products where the
	// CPU has them (AVX512-BF16), else converted to fp32.
	BF16
)

// kernelOf is the class of a matrix product whose weights are w.
func kernelOf(w Shape) Kernel {
	switch {
	case w.Block > 1:
		return Int8
	case w.Type == "bf16":
		return BF16
	}
	return FMA
}

// Cost is the work of op computing dst from srcs. Matrix products count a multiply and an
// add per inner-product term (2·M·N·K), whatever the types; element-wise ops a small
// constant per element. MUL_MAT_ID reads only the experts that its tokens selected, at
// most all of them, GET_ROWS only the rows it gathers, and SET_ROWS writes only the rows
// it sets (its dst is the whole KV cache, a view of it).
func Cost(op string, dst Shape, srcs []Shape) Work {
	w := Work{Bytes: dst.Bytes()}
	for _, s := range srcs {
		w.Bytes += s.Bytes()
	}
	switch op {
	case "MUL_MAT", "OUT_PROD":
		if len(srcs) > 0 {
			w.FLOPs = 2 * float64(srcs[0].Ne[0]) * dst.Elements()
			w.Kept, w.Kernel = srcs[0].Bytes(), kernelOf(srcs[0])
		}
	case "MUL_MAT_ID":
		if len(srcs) > 0 {
			w.FLOPs = 2 * float64(srcs[0].Ne[0]) * dst.Elements()
			w.Kept, w.Kernel = srcs[0].Bytes(), kernelOf(srcs[0])
			// dst is [rows, experts used, tokens]; src0 holds every expert.
			if experts := float64(srcs[0].Ne[2]); experts > 0 {
				used := min(experts, float64(dst.Ne[1])*float64(dst.Ne[2]))
				unread := srcs[0].Bytes() * (1 - used/experts)
				w.Bytes -= unread
				w.Kept -= unread
			}
		}
	case "GET_ROWS":
		w.FLOPs = dst.Elements()
		// src0 is the table ([cols, rows, ...]); dst holds the gathered rows, one per id.
		if len(srcs) > 0 {
			w.Kept = srcs[0].Bytes()
			if rows := rowsOf(srcs[0]); rows > 0 {
				unread := srcs[0].Bytes() * (1 - min(rowsOf(dst)/rows, 1))
				w.Bytes -= unread
				w.Kept -= unread
			}
		}
	case "SET_ROWS":
		// src0 holds the rows to set, one per id in src1, converted to dst's type; a third
		// source, where there is one, is the tensor dst views, which is not read.
		if len(srcs) >= 2 {
			w.FLOPs = srcs[0].Elements()
			w.Bytes = srcs[0].Bytes() + srcs[1].Bytes()
			if rows := rowsOf(dst); rows > 0 {
				w.Bytes += dst.Bytes() * min(rowsOf(srcs[0])/rows, 1)
			}
		}
	case "NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE":
		// Views: ggml computes nothing for them (older releases still dispatch them).
		return Work{}
	case "FLASH_ATTN_EXT":
		// q [D, n_q, heads], k [D, n_kv, kv heads], v [Dv, n_kv, kv heads]: Q·Kᵀ then ·V.
		if len(srcs) >= 3 {
			q, k, v := srcs[0], srcs[1], srcs[2]
			perPair := 2 * float64(q.Ne[0]+v.Ne[0])
			w.FLOPs = perPair * float64(k.Ne[1]) * float64(q.Ne[1]) * float64(q.Ne[2]) * float64(q.Ne[3])
			w.Window, w.KV = float64(k.Ne[1]), k.Bytes()+v.Bytes()
		}
	default:
		w.FLOPs = elementwise[op] * dst.Elements()
		if w.FLOPs == 0 {
			w.FLOPs = dst.Elements()
		}
	}
	return w
}

// rowsOf is the number of rows of s: all but its first dimension.
func rowsOf(s Shape) float64 { return float64(s.Ne[1]) * float64(s.Ne[2]) * float64(s.Ne[3]) }

// elementwise is FLOPs per output element of ops that cost more than one.
var elementwise = map[string]float64{
	"RMS_NORM": 3, "NORM": 5, "SOFT_MAX": 5, "ROPE": 6, "SWIGLU": 6, "GEGLU": 10, "SILU": 4, "GELU": 8,
}

// Peaks are a machine's attainable rates, all cores together.
type Peaks struct {
	FLOPS     float64 // fp32 fused multiply-adds: every op but quantised and bf16 matmuls
	Int8      float64 // int8 dot products, two operations a multiply-add; 0: FLOPS
	BF16      float64 // bf16 dot products; 0 (none on this CPU): FLOPS
	Bandwidth float64 // bytes per second read from memory (DRAM)
	Levels    []Level // the data caches, nearest first; none: every byte comes from memory
}

// Level is one level of the data caches, its instances that serve the CPUs together.
type Level struct {
	Name      string  `json:"name"` // L1, L2, L3; a ladder's ≤32KiB to ≤32MiB
	Size      int64   `json:"size"` // bytes
	Bandwidth float64 `json:"bandwidth"`
}

// Known is true when there are roofs to classify under.
func (p Peaks) Known() bool { return p.FLOPS > 0 && p.Bandwidth > 0 }

// Compute is the roof of w's kernel class, the FMA roof where that class has none, and
// its name as the roofline's metric names the roofs (RoofFLOPS, RoofInt8, RoofBF16).
func (p Peaks) Compute(w Work) (float64, string) {
	switch {
	case w.Kernel == Int8 && p.Int8 > 0:
		return p.Int8, RoofInt8
	case w.Kernel == BF16 && p.BF16 > 0:
		return p.BF16, RoofBF16
	}
	return p.FLOPS, RoofFLOPS
}

// The roofs by name: ggml.roofline.roof.
const (
	RoofBandwidth = "bandwidth"
	RoofFLOPS     = "flops"
	RoofInt8      = "int8"
	RoofBF16      = "bf16"
)

// Memory is the bandwidth roof of w, for a graph that reads kept bytes of tensors kept
// across graphs: each byte at the rate of the level it comes from, as a cache-aware
// roofline draws them (from). What the graph made comes from where the node's working
// set (all it reads and writes) is, what it keeps from where all it keeps is. level
// names the level most of the bytes come from.
func (p Peaks) Memory(w Work, kept float64) (bandwidth float64, level string) {
	near, nearLevel := p.from(w.Bytes)
	if w.Kept <= 0 || w.Bytes <= 0 {
		return near, nearLevel
	}
	far, farLevel := p.from(max(kept, w.Bytes))
	made := w.Bytes - w.Kept
	bandwidth = w.Bytes / (made/near + w.Kept/far)
	if w.Kept > made {
		return bandwidth, farLevel
	}
	return bandwidth, nearLevel
}

// from is the rate at which a working set of bytes comes to a node: that of the nearest
// level that holds it; where none does, memory's but for the last-level cache's share
// (its size over the bytes: adaptive replacement keeps about that much of a stream
// larger than the cache, and a node cannot tell which part).
func (p Peaks) from(bytes float64) (bandwidth float64, level string) {
	for _, l := range p.Levels {
		if bytes <= float64(l.Size) && l.Bandwidth > 0 {
			return l.Bandwidth, l.Name
		}
	}
	if n := len(p.Levels); n > 0 && p.Levels[n-1].Bandwidth > 0 {
		llc := p.Levels[n-1]
		hit := float64(llc.Size) / bytes
		return 1 / (hit/llc.Bandwidth + (1-hit)/p.Bandwidth), "DRAM"
	}
	return p.Bandwidth, "DRAM"
}

// Bound says what limits a node.
type Bound string

// Bounds.
const (
	Memory   Bound = "memory"
	Compute  Bound = "compute"
	Overhead Bound = "overhead" // far from both roofs in a short call: dispatch, synchronisation
	// Unexplained: far from both roofs in a call long enough that neither explains it.
	Unexplained Bound = "unexplained"
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
// thread, which some 25 ticks of thread time average out. And on graphs of AccountTick
// or longer on average: the kernel brings a running thread's CPU time up to date at its
// CPU's scheduler ticks (and at switches), so a graph shorter than a tick counts a tick
// of a running thread's time or none, and graphs that begin in step with the ticks catch
// fewer than their share. tiny-dense's 0.26 ms decode graphs, under llama-bench with two
// threads on their CPUs 92% of the run, read 45%, 341 of 360 graphs none at all
// (BENCHMARKS.md, session 47). AccountTick is the tick at 250 Hz, the longest of the
// common kernel configurations (1000 Hz: 1 ms). Every verdict of starved (a node's, an
// op's, a phase's, a finding's) is IsStarved over the graphs it speaks for.
const (
	StarvedBelow     = 0.8
	MinGraphs        = 2
	MinThreadSeconds = 0.1
	AccountTick      = 0.004 // seconds
)

// Enough says whether graphs graphs of threadSeconds of thread time are evidence enough
// for a verdict on what they computed: their ops' times, read by the probes' clocks, and
// their threads' CPU share where Resolved too.
func Enough(graphs int64, threadSeconds float64) bool {
	return graphs >= MinGraphs && threadSeconds >= MinThreadSeconds
}

// Resolved says whether graphs graphs of wall seconds in all, threadSeconds of thread
// time, are evidence enough for a verdict on their threads' CPU share.
func Resolved(graphs int64, threadSeconds, wall float64) bool {
	return Enough(graphs, threadSeconds) && wall >= AccountTick*float64(graphs)
}

// IsStarved says whether threads that had a CPU for share of the time of graphs graphs,
// threadSeconds of thread time and wall seconds of wall time, were starved.
func IsStarved(share float64, graphs int64, threadSeconds, wall float64) bool {
	return Resolved(graphs, threadSeconds, wall) && share < StarvedBelow
}

// Under OverheadBelow of its roof, a node's time is not its kernel's work: in a call
// shorter than OverheadCall, a node's fixed cost (its dispatch and the barrier that ends
// it, some microseconds) is most of the time, and it is overhead-bound; in a longer one,
// the roofline does not say what the time went to.
const (
	OverheadBelow = 0.1
	OverheadCall  = 50e-6 // seconds
)

// Class is a node's place under the roofline.
type Class struct {
	Bound Bound
	// Fraction is of the roof that bounds it: its level's bandwidth for memory, its
	// kernel class's peak otherwise. Above 1, the roof was under-measured: never clamped,
	// so that the defect shows.
	Fraction  float64
	Roof      string  // the roof Fraction is of: RoofBandwidth, or the kernel class's
	Level     string  // where most of its bytes come from: a Level's name or DRAM
	FLOPS     float64 // achieved
	Bandwidth float64 // achieved
}

// Classify places a node that did w in seconds, in a graph that reads kept bytes of
// tensors kept across graphs (Peaks.Memory). A node whose arithmetic intensity is below
// the ridge point of its roofs (compute over bandwidth) can at best reach the bandwidth
// roof; above it, the compute roof.
func Classify(w Work, kept, seconds float64, p Peaks) Class {
	if seconds <= 0 || !p.Known() {
		return Class{Bound: Overhead}
	}
	c := Class{FLOPS: w.FLOPs / seconds, Bandwidth: w.Bytes / seconds}
	compute, roof := p.Compute(w)
	bandwidth, level := p.Memory(w, kept)
	c.Level = level
	if w.Bytes > 0 && w.FLOPs/w.Bytes < compute/bandwidth {
		c.Bound, c.Fraction, c.Roof = Memory, c.Bandwidth/bandwidth, RoofBandwidth
	} else {
		c.Bound, c.Fraction, c.Roof = Compute, c.FLOPS/compute, roof
	}
	switch {
	case c.Fraction >= OverheadBelow:
	case seconds < OverheadCall:
		c.Bound = Overhead
	default:
		c.Bound = Unexplained
	}
	return c
}

// Attained adds up nodes' time at their roofs against the time they took: over many
// nodes, the fraction of the roofline they reached, each node against its own roofs
// (an op's nodes differ in size, and so in the level their data comes from).
type Attained struct{ atRoof, took float64 }

// Add counts a node that took seconds at fraction of its roof.
func (a *Attained) Add(fraction, seconds float64) {
	a.atRoof += fraction * seconds
	a.took += seconds
}

// Fraction is the nodes' time at their roofs over the time they took: at most 1 when no
// node exceeded its roof.
func (a Attained) Fraction() float64 {
	if a.took <= 0 {
		return 0
	}
	return a.atRoof / a.took
}
