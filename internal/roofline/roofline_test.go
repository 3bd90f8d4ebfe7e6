package roofline

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

var (
	q4   = func(ne ...int64) Shape { return Shape{Ne: ne4(ne), Block: 32, BlockBytes: 18} }
	f32  = func(ne ...int64) Shape { return Shape{Ne: ne4(ne), Block: 1, BlockBytes: 4} }
	f16  = func(ne ...int64) Shape { return Shape{Ne: ne4(ne), Block: 1, BlockBytes: 2} }
	peak = Peaks{FLOPS: 100e9, Bandwidth: 20e9} // ridge at 5 FLOP/byte
)

func ne4(ne []int64) [4]int64 {
	out := [4]int64{1, 1, 1, 1}
	copy(out[:], ne)
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// A decode matmul streams its quantised weights once: memory-bound. The same weights
// against a 512-token batch do 512 times the work for 4 times the bytes: compute-bound.
func TestMulMat(t *testing.T) {
	w := q4(2048, 2048)
	dec := Cost("MUL_MAT", f32(2048, 1), []Shape{w, f32(2048, 1)})
	if !near(dec.FLOPs, 2*2048*2048) || !near(dec.Bytes, 2048*2048*18/32+2*2048*4) || !near(dec.Kept, w.Bytes()) || dec.Kernel != Int8 {
		t.Fatalf("decode cost %+v", dec)
	}
	c := Classify(dec, 0, 200e-6, peak)
	if c.Bound != Memory || !near(c.Fraction, dec.Bytes/200e-6/peak.Bandwidth) || c.Level != "DRAM" {
		t.Errorf("decode %+v", c)
	}
	pre := Cost("MUL_MAT", f32(2048, 512), []Shape{w, f32(2048, 512)})
	c = Classify(pre, 0, 0.1, peak)
	if c.Bound != Compute || !near(c.FLOPS, 2*2048*2048*512/0.1) || !near(c.Fraction, c.FLOPS/peak.FLOPS) {
		t.Errorf("prefill %+v", c)
	}
	// Far below both roofs, the same prefill is unexplained: a call of 10 s is no node's
	// fixed cost. A tiny one far below them in a short call is overhead-bound.
	if c := Classify(pre, 0, 10, peak); c.Bound != Unexplained || c.Roof != RoofFLOPS {
		t.Errorf("slow prefill %+v", c)
	}
	add := Cost("ADD", f32(2048, 1), []Shape{f32(2048, 1), f32(2048, 1)})
	if c := Classify(add, 0, 40e-6, peak); c.Bound != Overhead || c.Roof != RoofBandwidth {
		t.Errorf("a short ADD %+v", c)
	}
}

// MUL_MAT_ID reads only the experts its tokens used; attention counts Q·Kᵀ and ·V.
func TestMoEAndAttention(t *testing.T) {
	experts := q4(2048, 1024, 8)
	moe := Cost("MUL_MAT_ID", f32(1024, 2, 1), []Shape{experts, f32(2048, 2, 1), Shape{Ne: ne4([]int64{2, 1}), Block: 1, BlockBytes: 4}})
	want := experts.Bytes()*2/8 + f32(1024, 2, 1).Bytes() + f32(2048, 2, 1).Bytes() + 8
	if !near(moe.Bytes, want) || !near(moe.Kept, experts.Bytes()*2/8) {
		t.Errorf("MUL_MAT_ID %+v, want %g bytes", moe, want)
	}
	att := Cost("FLASH_ATTN_EXT", f32(64, 32, 1), []Shape{f32(64, 1, 32), f16(64, 256, 8), f16(64, 256, 8)})
	if want := 2.0 * (64 + 64) * 256 * 1 * 32; !near(att.FLOPs, want) || att.Kernel != FMA || att.Kept != 0 {
		t.Errorf("attention %+v, want %g FLOPs", att, want)
	}
	if add := Cost("ADD", f32(2048), []Shape{f32(2048), f32(2048)}); add.FLOPs != 2048 || add.Kept != 0 {
		t.Errorf("ADD %+v", add)
	}
}

func TestClassifyWithoutPeaks(t *testing.T) {
	if c := Classify(Work{FLOPs: 1, Bytes: 1}, 0, 1, Peaks{}); c.Bound != Overhead {
		t.Errorf("%+v", c)
	}
}

// The built-in probe finds roofs in a plausible range for any machine, emulated arm64
// (about 1 GFLOP/s under qemu) included.
func TestMeasure(t *testing.T) {
	p := measure(400 * time.Millisecond)
	if p.FLOPS < 1e8 || p.FLOPS > 1e14 || p.Int8 < 1e8 || p.Int8 > 1e15 || p.Bandwidth < 1e8 || p.Bandwidth > 1e13 {
		t.Fatalf("peaks %+v", p)
	}
	dot, bf16 := DotKernel()
	if (bf16 != "") != (p.BF16 > 0) {
		t.Errorf("bf16 kernel %q, roof %g", bf16, p.BF16)
	}
	t.Logf("peak %.1f GFLOP/s (%s), int8 %.1f Gop/s (%s), bf16 %.1f GFLOP/s (%s), memory %.1f GB/s, %d trials, share %.2f",
		p.FLOPS/1e9, FMAKernel(), p.Int8/1e9, dot, p.BF16/1e9, bf16, p.Bandwidth/1e9, p.trials, p.share)
	for _, l := range p.Levels {
		if l.Bandwidth < 1e8 || l.Size <= 0 {
			t.Errorf("cache level %+v", l)
		}
		t.Logf("%s (%d KiB): %.1f GB/s", l.Name, l.Size>>10, l.Bandwidth/1e9)
	}
}

// GET_ROWS reads the rows it gathers, not the whole table: a token's embedding from a
// 32000-row q4_0 table is one row's 1152 bytes.
func TestGetRowsReadsItsRows(t *testing.T) {
	table := Shape{Ne: [4]int64{2048, 32000, 1, 1}, Block: 32, BlockBytes: 18}
	ids := Shape{Ne: [4]int64{1, 1, 1, 1}, Block: 1, BlockBytes: 4}
	dst := Shape{Ne: [4]int64{2048, 1, 1, 1}, Block: 1, BlockBytes: 4}
	w := Cost("GET_ROWS", dst, []Shape{table, ids})
	if want := 2048*18/32.0 + 4 + 2048*4; w.Bytes != want || w.Kept != 2048*18/32.0 {
		t.Errorf("GET_ROWS %+v, want %g bytes", w, want)
	}
}

// SET_ROWS writes the rows it sets into the KV cache, its dst (a view of all of it):
// decode's one token of 512 f16 values into a 4096-row cache moves that row, not the
// cache (which made it read up to 5 times the memory roof).
func TestSetRowsWritesItsRows(t *testing.T) {
	cache := f16(512, 4096)
	rows := f32(512, 1)
	ids := Shape{Ne: [4]int64{1, 1, 1, 1}, Block: 1, BlockBytes: 8}
	want := 512*2.0 + 512*4 + 8
	if w := Cost("SET_ROWS", cache, []Shape{rows, ids}); w.Bytes != want || w.FLOPs != 512 || w.Kept != 0 {
		t.Errorf("SET_ROWS %+v, want %g bytes", w, want)
	}
	// Newer ggml adds the cache it views as a third source.
	if w := Cost("SET_ROWS", cache, []Shape{rows, ids, cache}); w.Bytes != want {
		t.Errorf("SET_ROWS with its cache as a source %+v, want %g bytes", w, want)
	}
}

// Each node is judged against the roofs of its kernel class and of the cache levels its
// bytes come from.
func TestCacheAwareRoofs(t *testing.T) {
	p := Peaks{FLOPS: 200e9, Int8: 600e9, Bandwidth: 40e9, Levels: []Level{{"L1", 64 << 10, 800e9}, {"L2", 2 << 20, 300e9}, {"L3", 32 << 20, 120e9}}}
	// A small element-wise op: its working set is in L1.
	add := Cost("ADD", f32(2048), []Shape{f32(2048), f32(2048)})
	if bw, level := p.Memory(add, 0); bw != 800e9 || level != "L1" {
		t.Errorf("ADD: %g B/s from %s", bw, level)
	}
	// Decode's matmul: its 2.4 MB of weights fit in L3, but the model's 700 MB that
	// the graph reads do not, so they come from memory (but for the share of them that
	// L3 keeps), and the rest from L3, which holds the node's working set.
	w := q4(2048, 2048)
	dec := Cost("MUL_MAT", f32(2048, 1), []Shape{w, f32(2048, 1)})
	bw, level := p.Memory(dec, 700e6)
	hit := float64(32<<20) / 700e6
	if want := dec.Bytes / (dec.Kept*(hit/120e9+(1-hit)/40e9) + (dec.Bytes-dec.Kept)/120e9); level != "DRAM" || !near(bw, want) {
		t.Errorf("decode matmul: %g B/s from %s, want %g from DRAM", bw, level, want)
	}
	// A model small enough that the last-level cache holds all the graph reads.
	if _, level := p.Memory(dec, 20e6); level != "L3" {
		t.Errorf("a small model's matmul from %s, want L3", level)
	}
	// Beyond every cache: prefill's SWIGLU of 50 MB that its matmuls just wrote comes
	// from L3 for L3's share of it, from memory for the rest.
	big := Work{FLOPs: 1, Bytes: 50e6}
	hit = float64(32<<20) / 50e6
	if bw, level := p.Memory(big, 700e6); level != "DRAM" || !near(bw, 1/(hit/120e9+(1-hit)/40e9)) {
		t.Errorf("50 MB: %g B/s from %s", bw, level)
	}
	// No caches known.
	if bw, level := (Peaks{FLOPS: 1, Bandwidth: 40e9}).Memory(add, 0); bw != 40e9 || level != "DRAM" {
		t.Errorf("no caches: %g from %s", bw, level)
	}
	// Quantised matmuls run int8 dot products; f16 ones fp32 FMAs; bf16 ones bf16 dot
	// products where the CPU has them.
	pre := Cost("MUL_MAT", f32(2048, 512), []Shape{w, f32(2048, 512)})
	if c := Classify(pre, 700e6, 0.002, p); computeOf(p, pre) != 600e9 || c.Bound != Compute || !near(c.Fraction, pre.FLOPs/0.002/600e9) {
		t.Errorf("q4_0 prefill %+v against %g", c, computeOf(p, pre))
	}
	if half := Cost("MUL_MAT", f32(2048, 512), []Shape{f16(2048, 2048), f32(2048, 512)}); half.Kernel != FMA || computeOf(p, half) != 200e9 {
		t.Errorf("f16 prefill %+v against %g", half, computeOf(p, half))
	}
	bf16 := f16(2048, 2048)
	bf16.Type = "bf16"
	bp := Cost("MUL_MAT", f32(2048, 512), []Shape{bf16, f32(2048, 512)})
	if withBF16 := (Peaks{FLOPS: 200e9, BF16: 400e9, Bandwidth: 40e9}); bp.Kernel != BF16 || computeOf(withBF16, bp) != 400e9 || computeOf(p, bp) != 200e9 {
		t.Errorf("bf16 prefill %+v against %g, without a bf16 roof %g", bp, computeOf(withBF16, bp), computeOf(p, bp))
	}
	if r, name := (Peaks{FLOPS: 200e9, Bandwidth: 40e9}).Compute(pre); r != 200e9 || name != RoofFLOPS {
		t.Error("without an int8 roof, quantised matmuls are judged against the FMA roof")
	}
}

// An op's fraction is its nodes' time at their roofs over their time: at most 1 when
// no node exceeded its roof, whatever their sizes.
func TestAttained(t *testing.T) {
	var a Attained
	if a.Fraction() != 0 {
		t.Fatal(a)
	}
	a.Add(0.9, 1e-3)
	a.Add(0.1, 3e-3)
	if !near(a.Fraction(), (0.9e-3+0.3e-3)/4e-3) {
		t.Errorf("fraction %g", a.Fraction())
	}
}

// The caches are read from sysfs: data and unified levels, each level's instances that
// serve the allowed CPUs together, and a buffer per probe thread that fits its instance.
func TestCaches(t *testing.T) {
	root := t.TempDir()
	put := func(cpu, index int, level, typ, size, shared string) {
		d := filepath.Join(root, fmt.Sprintf("cpu%d", cpu), "cache", fmt.Sprintf("index%d", index))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"level": level, "type": typ, "size": size, "shared_cpu_list": shared} {
			if err := os.WriteFile(filepath.Join(d, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for c := range 4 {
		put(c, 0, "1", "Data", "32K", fmt.Sprint(c))
		put(c, 1, "1", "Instruction", "32K", fmt.Sprint(c))
		put(c, 2, "2", "Unified", "1024K", map[bool]string{true: "0-1", false: "2-3"}[c < 2])
		put(c, 3, "3", "Unified", "32768K", "0-3")
	}
	got := caches(root, []int{0, 1, 2}) // CPU 3 not allowed
	want := []cache{
		{Level{"L1", 96 << 10, 0}, 16 << 10},
		{Level{"L2", 2 << 20, 0}, 256 << 10}, // 0-1 share one: half of it over 2
		{Level{"L3", 32 << 20, 0}, (32 << 20) / 3 / 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("caches %+v, want %+v", got, want)
	}
	if c := caches(filepath.Join(root, "none"), []int{0}); len(c) != 0 {
		t.Errorf("no sysfs: %+v", c)
	}
}

// Where sysfs lists no caches, the levels are a ladder of working sets, each roofed at
// the rate read at the size below it: a node whose set the hidden caches hold (CI's
// 12 MB ADD, two threads) is judged under a rate read at a set no larger.
func TestLadder(t *testing.T) {
	l := ladder(2)
	if len(l) != 11 || l[0].Name != "≤32KiB" || l[0].Size != 32<<10 || l[0].perThread != 16<<10 ||
		l[10].Name != "≤32MiB" || l[10].Size != 32<<20 {
		t.Fatalf("ladder %+v", l)
	}
	levels := []Level{{"≤32KiB", 32 << 10, 500e9}, {"≤64KiB", 64 << 10, 300e9}, {"≤128KiB", 128 << 10, 320e9}, {"≤256KiB", 256 << 10, 100e9}}
	ceilings(levels)
	for i, want := range []float64{500e9, 500e9, 320e9, 320e9} {
		if levels[i].Bandwidth != want {
			t.Errorf("level %s %g, want %g", levels[i].Name, levels[i].Bandwidth, want)
		}
	}
	p := Peaks{FLOPS: 1e11, Bandwidth: 50e9, Levels: levels}
	if bw, level := p.Memory(Work{Bytes: 200 << 10}, 0); bw != 320e9 || level != "≤256KiB" {
		t.Errorf("a 200 KiB set: %g from %s", bw, level)
	}
}

// computeOf is the compute roof of w's kernel class.
func computeOf(p Peaks, w Work) float64 {
	r, _ := p.Compute(w)
	return r
}

// Attention's queries read only the KV cells up to their positions: ggml skips the rest
// of the window, masked, and its work and K and V bytes shrink in proportion.
func TestAttending(t *testing.T) {
	q, k := f32(64, 64), f16(64, 256)
	fa := Cost("FLASH_ATTN_EXT", f32(64, 64), []Shape{q, k, k})
	if fa.Window != 256 || !near(fa.KV, 2*k.Bytes()) {
		t.Fatalf("attention's window %g, K and V %g bytes", fa.Window, fa.KV)
	}
	a, ok := fa.Attending(64)
	if !ok || !near(a.FLOPs, fa.FLOPs/4) || !near(a.KV, fa.KV/4) || !near(a.Bytes, fa.Bytes-fa.KV*3/4) {
		t.Errorf("a quarter of the window: %+v from %+v", a, fa)
	}
	if w, ok := fa.Attending(300); !ok || w != fa {
		t.Error("more cells than the window: not the window's work")
	}
	if _, ok := fa.Attending(0); ok {
		t.Error("no cells known: attention's work known")
	}
	mm := Cost("MUL_MAT", f32(2048, 1), []Shape{q4(2048, 2048), f32(2048, 1)})
	if w, ok := mm.Attending(0); !ok || w != mm {
		t.Error("a matmul's work changed by the cells attended")
	}
}

// A view computes nothing: no work to judge, however long its dispatch took.
func TestViews(t *testing.T) {
	for _, op := range []string{"RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "NONE"} {
		if w := Cost(op, f32(2048, 64), []Shape{f32(2048, 64)}); w != (Work{}) {
			t.Errorf("%s: %+v", op, w)
		}
	}
}
