package page

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/summary"
)

// hostile is what a GGUF file or a target's memory can hold: markup, script, a closing
// script tag, quotes, and a terminal escape.
const hostile = `</script><img src=x onerror="document.body.setAttribute('data-pwned','1')"><script>document.body.setAttribute('data-pwned','2')</script>"'` + "\x1b[31m"

// full is a view with every section filled, names hostile.
func full() *summary.View {
	op := func(name, weight, bound string, ms, share float64) *summary.Op {
		return &summary.Op{Op: name, Weight: weight, Calls: 10, TotalMS: ms, MeanUS: ms * 100, Share: share, Bound: bound,
			FLOPS: 5e9, Bandwidth: 20e9, Intensity: 0.25, PeakFrac: 0.4,
			Sched: summary.SchedSums{OffCPU: 0.001, BarrierWait: 0.002, ThreadTime: 0.02}, Counters: map[string]int64{"task_clock": 5}}
	}
	ph := func(name string) *summary.Phase {
		return &summary.Phase{Name: name, Decodes: 4, Tokens: 40, DecodeSeconds: 1, TokensPerSec: 40, TracedGraphs: 4, GraphSeconds: 0.5,
			Ops:     []*summary.Op{op("MUL_MAT", "q4_0", "memory", 30, 0.6), op(hostile, hostile, "overhead", 2, 0.04)},
			Layers:  []summary.Layer{{Layer: 0, Seconds: 0.1, Share: 0.2}, {Layer: 1, Seconds: 0.12, Share: 0.24}},
			OpLayer: &summary.OpLayer{Ops: []string{"MUL_MAT", hostile}, Layers: []int{0, 1}, Seconds: [][]float64{{0.1, 0.11}, {0.001, 0.002}}},
			Sched:   summary.SchedSums{OffCPU: 0.01, RunQueue: 0.002, BarrierWait: 0.02, ThreadTime: 1, Preemptions: 3}}
	}
	return &summary.View{Generated: time.Unix(1_800_000_000, 0).UTC(), Processes: []*summary.Process{{
		ID: "h\x00p", Title: hostile + " (pid 1)", Model: hostile,
		Resource: []summary.KV{{Key: "llama.model.name", Value: hostile}},
		Roofs:    summary.Roofs{FLOPS: 200e9, Bandwidth: 50e9, Source: hostile, Measured: "2026-11-23T10:00:00Z"},
		Phases:   []*summary.Phase{ph("prefill"), ph("decode")},
		Latency:  summary.Quantiles{Count: 4, P50: 20, P90: 25, P99: 30, Max: 31},
		Requests: &summary.Requests{Count: 9, TTFT: summary.Quantiles{Count: 9, P50: 208, P90: 7520}, TPOT: summary.Quantiles{Count: 9, P50: 61, P90: 62},
			Input: 996, Cached: 976, Output: 216, MaxShared: 3},
		Rate: []summary.Rate{{Time: 1_800_000_000, Decode: 40}, {Time: 1_800_000_001, Decode: 42, Prefill: 100}},
		Timeline: &summary.Timeline{Phase: "decode", Tokens: 1, Duration: 100, Threads: 2, Critical: 80, Nodes: []summary.Node{
			{Op: "MUL_MAT", Tensor: hostile, Start: 0, Duration: 60, Busy: []float64{55, 50}, Critical: true},
			{Op: "ADD", Tensor: "ffn_out-0", Start: 60, Duration: 30, Busy: []float64{20, 28}}},
			Device: []summary.Work{{Backend: hostile, Copy: true, Start: -40, Duration: 5, Bytes: 4096, Tensor: hostile},
				{Backend: hostile, Start: -30, Duration: 25, Wait: 20, Nodes: 95},
				{Backend: "VK", Start: 95, Duration: 50, Wait: 45, Nodes: 12, Bound: true}}},
		MoE: []summary.MoELayer{{Layer: 0, Selections: []int64{5, 1, 0, 2}, Imbalance: 0.9}},
		Backends: []summary.Backend{{Backend: hostile, Splits: 3, Seconds: 0.1},
			{Backend: "VK", Splits: 3, Seconds: 0.01, DeviceSplits: 3, DeviceSeconds: 0.3, WaitSeconds: 0.2,
				Ops: map[string]int64{"MUL_MAT": 6, hostile: 3}, OpSeconds: map[string]float64{"MUL_MAT": 0.2, hostile: 0.05}}},
		Copies:   []summary.Copy{{Source: "CPU", Destination: hostile, Copies: 2, Bytes: 4096, Seconds: 0.01}},
		Counters: []string{"task_clock"},
		Findings: []summary.Finding{{ID: "x", Severity: "warning", Title: hostile, Advice: hostile, Evidence: []string{hostile}}},
		End:      &summary.End{Cause: "killed by SIGKILL", Failed: true, Text: "killed by SIGKILL: " + hostile},
	}}}
}

func TestTemplateEscapesData(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, full(), Static); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// The data script holds the payload only as escaped JSON: no tag can close it.
	if strings.Count(page, "</script>") != 4 || strings.Contains(page, "<img src=x") {
		t.Errorf("hostile text reached the page as markup")
	}
}
