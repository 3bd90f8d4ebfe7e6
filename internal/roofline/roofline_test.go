package roofline

import (
	"math"
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
	flops, bytes := Cost("MUL_MAT", f32(2048, 1), []Shape{w, f32(2048, 1)})
	if !near(flops, 2*2048*2048) || !near(bytes, 2048*2048*18/32+2*2048*4) {
		t.Fatalf("decode cost %g FLOPs, %g bytes", flops, bytes)
	}
	c := Classify(flops, bytes, 200e-6, peak)
	if c.Bound != Memory || !near(c.Fraction, bytes/200e-6/peak.Bandwidth) {
		t.Errorf("decode %+v", c)
	}
	flops, bytes = Cost("MUL_MAT", f32(2048, 512), []Shape{w, f32(2048, 512)})
	c = Classify(flops, bytes, 0.1, peak)
	if c.Bound != Compute || !near(c.FLOPS, 2*2048*2048*512/0.1) || !near(c.Fraction, c.FLOPS/peak.FLOPS) {
		t.Errorf("prefill %+v", c)
	}
	// Far below both roofs, the same prefill is overhead-bound.
	if c := Classify(flops, bytes, 10, peak); c.Bound != Overhead {
		t.Errorf("slow prefill %+v", c)
	}
}

// MUL_MAT_ID reads only the experts its tokens used; attention counts Q·Kᵀ and ·V.
func TestMoEAndAttention(t *testing.T) {
	experts := q4(2048, 1024, 8)
	_, bytes := Cost("MUL_MAT_ID", f32(1024, 2, 1), []Shape{experts, f32(2048, 2, 1), Shape{Ne: ne4([]int64{2, 1}), Block: 1, BlockBytes: 4}})
	want := experts.Bytes()*2/8 + f32(1024, 2, 1).Bytes() + f32(2048, 2, 1).Bytes() + 8
	if !near(bytes, want) {
		t.Errorf("MUL_MAT_ID bytes %g, want %g", bytes, want)
	}
	flops, _ := Cost("FLASH_ATTN_EXT", f32(64, 32, 1), []Shape{f32(64, 1, 32), f16(64, 256, 8), f16(64, 256, 8)})
	if want := 2.0 * (64 + 64) * 256 * 1 * 32; !near(flops, want) {
		t.Errorf("attention FLOPs %g, want %g", flops, want)
	}
	if flops, _ := Cost("ADD", f32(2048), []Shape{f32(2048), f32(2048)}); flops != 2048 {
		t.Errorf("ADD FLOPs %g", flops)
	}
}

func TestClassifyWithoutPeaks(t *testing.T) {
	if c := Classify(1, 1, 1, Peaks{}); c.Bound != Overhead {
		t.Errorf("%+v", c)
	}
}

// The built-in probe finds roofs in a plausible range for any machine, emulated arm64
// (about 1 GFLOP/s under qemu) included.
func TestMeasure(t *testing.T) {
	p := measure(200 * time.Millisecond)
	if p.FLOPS < 1e8 || p.FLOPS > 1e14 || p.Bandwidth < 1e8 || p.Bandwidth > 1e13 {
		t.Fatalf("peaks %+v", p)
	}
	t.Logf("peak %.1f GFLOP/s (%s), %.1f GB/s", p.FLOPS/1e9, FMAKernel(), p.Bandwidth/1e9)
}

// GET_ROWS reads the rows it gathers, not the whole table: a token's embedding from a
// 32000-row q4_0 table is one row's 1152 bytes.
func TestGetRowsReadsItsRows(t *testing.T) {
	table := Shape{Ne: [4]int64{2048, 32000, 1, 1}, Block: 32, BlockBytes: 18}
	ids := Shape{Ne: [4]int64{1, 1, 1, 1}, Block: 1, BlockBytes: 4}
	dst := Shape{Ne: [4]int64{2048, 1, 1, 1}, Block: 1, BlockBytes: 4}
	_, bytes := Cost("GET_ROWS", dst, []Shape{table, ids})
	if want := 2048*18/32.0 + 4 + 2048*4; bytes != want {
		t.Errorf("GET_ROWS bytes %g, want %g", bytes, want)
	}
}
