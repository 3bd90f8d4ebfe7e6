package signals

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/roofline"
)

// decodeGraph is shaped like a 1B Llama decode on 2 threads: 16 layers of 17 computed
// nodes, each reading the node before it and a weight, with the node descriptions shared
// across tokens as the profiler's cache shares them.
func decodeGraph() *assemble.Graph {
	ops := []string{"RMS_NORM", "MUL", "MUL_MAT", "MUL_MAT", "MUL_MAT", "ROPE", "ROPE", "CPY", "CPY",
		"FLASH_ATTN_EXT", "MUL_MAT", "ADD", "RMS_NORM", "MUL_MAT", "MUL_MAT", "GLU", "MUL_MAT"}
	g := &assemble.Graph{PID: 1, TID: 1, NNodes: 500, NThreads: 2, Start: 1000, Traced: true}
	ts := uint64(1000)
	for l := 0; l < 16; l++ {
		for i, op := range ops {
			tensor := uint64(0x10000 + 0x200*len(g.Nodes))
			info := &assemble.NodeInfo{Op: op, Name: fmt.Sprintf("t%d-%d", i, l), Type: "f32", Shape: [4]int64{2048, 1, 1, 1},
				Srcs: []assemble.Src{assemble.NewSrc("f32", [4]int64{2048, 1, 1, 1}), assemble.NewSrc("q4_0", [4]int64{2048, 2048, 1, 1})},
				Work: roofline.Work{FLOPs: 8e6, Bytes: 2.4e6}, Reads: []uint64{tensor - 0x200, 0x900000 + tensor}}
			g.Nodes = append(g.Nodes, &assemble.Node{Tensor: tensor, Info: info, Start: ts, End: ts + 50_000,
				Threads: []assemble.ThreadTime{{Ith: 0, Start: ts, Busy: ts + 40_000, End: ts + 50_000}}})
			ts += 50_000
		}
	}
	g.End = ts
	return g
}

// BenchmarkGraphSpans is the collector's work per token at full tracing.
func BenchmarkGraphSpans(b *testing.B) {
	s := NewSpans(Clock{Offset: 1000}, true, roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9}, nil)
	g := decodeGraph()
	p := &Origin{PID: 1, VPID: 1, Exe: "/usr/bin/llama-server"}
	b.ReportAllocs()
	for b.Loop() {
		s.Graph(ptrace.NewTraces(), p, g)
	}
}
