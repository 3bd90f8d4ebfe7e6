//go:build e2e

package receiver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Roofline classification without a PMU: decode matmuls stream their quantised weights
// and are memory-bound, at most at the measured bandwidth; prefill matmuls reach a far
// higher rate, under the int8 roof.
func TestE2ERoofline(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), fullTracing)
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 512, 16, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, _ := c.stop(t)
	all := spans(traces)
	byID := spansByID(all)
	phase := func(s span) any { // node → graph → split → llama_decode
		return byID[byID[byID[s.parent].parent].parent].attrs["llama.phase"]
	}
	flops := map[any][]float64{}
	memory, decode := 0, 0
	bounds := map[any]int{}
	for _, s := range all {
		src, _ := s.attrs["ggml.src"].([]any)
		if s.name != "MUL_MAT" || len(src) == 0 || !strings.HasPrefix(src[0].(string), "q4_0") {
			continue
		}
		ph := phase(s)
		flops[ph] = append(flops[ph], s.attrs["ggml.roofline.flops_per_second"].(float64))
		if ph != "decode" {
			continue
		}
		decode++
		bounds[s.attrs["ggml.roofline.bound"]]++
		// No node above its roof: checkRoofs, for every scenario.
		if s.attrs["ggml.roofline.bound"] == "memory" {
			memory++
		}
	}
	if decode == 0 || len(flops["prefill"]) == 0 {
		t.Fatalf("q4_0 MUL_MAT spans: %d decode, %d prefill", decode, len(flops["prefill"]))
	}
	// A graph whose threads lacked their CPUs (another process's burst: a fresh CI run
	// saw 4 of 17) is rightly called starved, not judged by its roofs; the rest are
	// memory-bound, and most graphs had their CPUs.
	starved := bounds["starved"]
	if float64(memory) < 0.9*float64(decode-starved) || 2*starved > decode {
		t.Errorf("%d of %d decode q4_0 MUL_MAT nodes are memory-bound, %d starved; want at least 90%% of those not starved, and at most half starved (bounds %v)",
			memory, decode, starved, bounds)
	}
	pre, dec := median(flops["prefill"]), median(flops["decode"])
	if pre < 2*dec {
		t.Errorf("median MUL_MAT rate: prefill %.1f GFLOP/s, decode %.1f GFLOP/s; want prefill at least twice as high", pre/1e9, dec/1e9)
	}
	t.Logf("q4_0 MUL_MAT: %d decode nodes, %d memory-bound; median prefill %.1f GFLOP/s, decode %.1f GFLOP/s",
		decode, memory, pre/1e9, dec/1e9)
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
