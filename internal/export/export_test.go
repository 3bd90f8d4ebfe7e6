package export

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/roofline"
)

func TestLayer(t *testing.T) {
	for name, want := range map[string]int{"Qcur-12": 12, "ffn_out-3": 3, "cache_k_l4 (view)": 4, "result_output": -1, "inp_embd": -1, "kq-0": 0} {
		if got := Layer(name); got != want {
			t.Errorf("Layer(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestDecodeSpans(t *testing.T) {
	s := NewSpans(Clock{Offset: 1000}, true, roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9})
	d := &assemble.Decode{PID: 1, TID: 1, Tokens: 32, Start: 10, End: 100, Scheds: []assemble.Sched{{TID: 1, NNodes: 9, Start: 15, End: 95}}, Graphs: []*assemble.Graph{{
		TID: 1, NNodes: 5, NThreads: 2, Start: 20, End: 90, Traced: true,
		Nodes: []*assemble.Node{{
			Info: &assemble.NodeInfo{Op: "MUL_MAT", Name: "Qcur-1", Type: "f32", Shape: [4]int64{2048, 32, 1, 1}, Srcs: []assemble.Src{assemble.NewSrc("q4_0", [4]int64{2048, 2048, 1, 1})},
				FLOPs: 8e6, Bytes: 2.4e6},
			Sched: events.Sched{OffCPU: 12, Preemptions: 1},
			Start: 30, End: 80,
			Threads: []assemble.ThreadTime{{Ith: 1, Start: 31, Busy: 70, End: 80}, {Ith: 0, Start: 30, Busy: 75, End: 79}},
		}},
	}}}
	td := ptrace.NewTraces()
	s.Decode(td, &Process{PID: 1, VPID: 1, Exe: "/usr/bin/llama-server"}, d)
	rs := td.ResourceSpans().At(0)
	if v, _ := rs.Resource().Attributes().Get("service.name"); v.Str() != "llama-server" {
		t.Errorf("service.name %q", v.Str())
	}
	spans := rs.ScopeSpans().At(0).Spans()
	if spans.Len() != 4 {
		t.Fatalf("%d spans", spans.Len())
	}
	dec, sched, graph, node := spans.At(0), spans.At(1), spans.At(2), spans.At(3)
	if dec.Name() != "llama_decode" || sched.ParentSpanID() != dec.SpanID() || graph.ParentSpanID() != sched.SpanID() ||
		node.ParentSpanID() != graph.SpanID() || node.TraceID() != dec.TraceID() {
		t.Fatal("spans not nested in one trace")
	}
	if dec.StartTimestamp() != 1010 || node.EndTimestamp() != 1080 {
		t.Errorf("timestamps %d %d", dec.StartTimestamp(), node.EndTimestamp())
	}
	a := node.Attributes().AsRaw()
	if node.Name() != "MUL_MAT" || a["ggml.layer"] != int64(1) || a["ggml.tensor.type"] != "f32" {
		t.Errorf("node %s %v", node.Name(), a)
	}
	if busy := a["ggml.thread.busy_ns"].([]any); busy[0] != int64(45) || busy[1] != int64(39) {
		t.Errorf("busy %v", busy)
	}
	if a["ggml.roofline.bound"] != "memory" || a["ggml.roofline.peak_fraction"] != 2.4e6/50e-9/20e9 || a["ggml.flops"] != 8e6 {
		t.Errorf("roofline attributes %v", a)
	}
	if a["ggml.sched.off_cpu_ns"] != int64(12) || a["ggml.sched.preemptions"] != int64(1) || a["ggml.sched.runqueue_ns"] != nil {
		t.Errorf("scheduler attributes %v", a)
	}
	if a["ggml.barrier.wait_ns"] != int64(10+4) {
		t.Errorf("barrier wait %v", a["ggml.barrier.wait_ns"])
	}
	if src := a["ggml.src"].([]any); src[0] != "q4_0[2048 2048 1 1]" {
		t.Errorf("sources %v", src)
	}
	if dec.Attributes().AsRaw()["llama.phase"] != "prefill" {
		t.Error("32 tokens is prefill")
	}
}
