package signals

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
)

func TestLayer(t *testing.T) {
	for name, want := range map[string]int{"Qcur-12": 12, "ffn_out-3": 3, "cache_k_l4 (view)": 4, "result_output": -1, "inp_embd": -1, "kq-0": 0} {
		if got := Layer(name); got != want {
			t.Errorf("Layer(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestImbalance(t *testing.T) {
	for _, tc := range []struct {
		counts []int64
		want   float64
	}{
		{[]int64{4, 4, 4, 4}, 0},
		{[]int64{0, 0}, 0},
		{[]int64{8, 0, 0, 0}, math.Sqrt(3)},
		{[]int64{3, 1}, 0.5},
	} {
		if got := Imbalance(tc.counts); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Imbalance(%v) = %g, want %g", tc.counts, got, tc.want)
		}
	}
}

func TestDecodeSpans(t *testing.T) {
	s := NewSpans(Clock{Offset: 1000}, true, roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9}, nil)
	d := &assemble.Step{PID: 1, TID: 1, Tokens: 32, Start: 10, End: 100, Graphs: []*assemble.Graph{{
		TID: 1, NNodes: 5, NThreads: 2, Start: 20, End: 90, Traced: true,
		Nodes: []*assemble.Node{{
			Info: &assemble.NodeInfo{Op: "MUL_MAT", Name: "Qcur-1", Type: "f32", Shape: [4]int64{2048, 32, 1, 1}, Srcs: []assemble.Src{assemble.NewSrc("q4_0", [4]int64{2048, 2048, 1, 1})},
				Work: roofline.Work{FLOPs: 8e6, Bytes: 2.4e6}},
			Sched: events.CPUSched{OffCPU: 12, Preemptions: 1},
			Start: 30, End: 80,
			Threads: []assemble.ThreadTime{{Ith: 1, Start: 31, Busy: 70, End: 80}, {Ith: 0, Start: 30, Busy: 75, End: 79}},
		}},
	}}}
	td := ptrace.NewTraces()
	s.Step(td, &Origin{PID: 1, VPID: 1, Exe: "/usr/bin/llama-server"}, d)
	rs := td.ResourceSpans().At(0)
	if v, _ := rs.Resource().Attributes().Get("service.name"); v.Str() != "llama-server" {
		t.Errorf("service.name %q", v.Str())
	}
	spans := rs.ScopeSpans().At(0).Spans()
	if spans.Len() != 3 {
		t.Fatalf("%d spans", spans.Len())
	}
	dec, graph, node := spans.At(0), spans.At(1), spans.At(2)
	if dec.Name() != "llama_decode" || graph.ParentSpanID() != dec.SpanID() ||
		node.ParentSpanID() != graph.SpanID() || node.TraceID() != dec.TraceID() {
		t.Fatal("spans not nested in one trace")
	}
	if dec.StartTimestamp() != 1010 || node.EndTimestamp() != 1080 {
		t.Errorf("timestamps %d %d", dec.StartTimestamp(), node.EndTimestamp())
	}
	a := node.Attributes().AsRaw()
	if node.Name() != "MUL_MAT" || a["ggml.layer"] != int64(1) || a["ggml.tensor.type"] != "f32" || a["ggml.weight.type"] != "q4_0" {
		t.Errorf("node %s %v", node.Name(), a)
	}
	if busy := a["ggml.thread.busy_ns"].([]any); busy[0] != int64(45) || busy[1] != int64(39) {
		t.Errorf("busy %v", busy)
	}
	if a["ggml.roofline.bound"] != "memory" || a["ggml.roofline.peak_fraction"] != 2.4e6/50e-9/20e9 || a["ggml.flops"] != 8e6 ||
		a["ggml.roofline.level"] != "DRAM" {
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

	// The op metrics name a matmul by its weights' type as well as its output's.
	// With the roofs they were classified under, and how those were obtained.
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	roofs := roofline.Roofs{Peaks: roofline.Peaks{FLOPS: 100e9, Int8: 400e9, Bandwidth: 20e9,
		Levels: []roofline.Level{{Name: "L1", Size: 64 << 10, Bandwidth: 300e9}}}, Source: roofline.SourceStored, At: at}
	m := NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofs, nil)
	m.Step(&Origin{PID: 1, Exe: "x"}, d)
	ms := m.Emit(Telemetry{}).ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	found := false
	for i := 0; i < ms.Len(); i++ {
		if mt := ms.At(i); mt.Name() == "profinfer.roofline.peak" {
			got := map[string]float64{}
			for j := 0; j < mt.Gauge().DataPoints().Len(); j++ {
				dp := mt.Gauge().DataPoints().At(j)
				a := dp.Attributes().AsRaw()
				if a["profinfer.roofline.source"] != "stored" || a["profinfer.roofline.measured"] != "2026-11-23T10:00:00Z" {
					t.Errorf("roof attributes %v", a)
				}
				got[a["ggml.roofline.roof"].(string)] = dp.DoubleValue()
			}
			if got["flops"] != 100e9 || got["bandwidth"] != 20e9 || got["int8"] != 400e9 || len(got) != 3 {
				t.Errorf("roofs %v", got)
			}
		}
		if mt := ms.At(i); mt.Name() == "profinfer.roofline.cache.bandwidth" {
			dp := mt.Gauge().DataPoints().At(0)
			if a := dp.Attributes().AsRaw(); mt.Gauge().DataPoints().Len() != 1 || dp.DoubleValue() != 300e9 ||
				a["profinfer.roofline.cache.level"] != "L1" || a["profinfer.roofline.cache.size"] != int64(64<<10) || a["profinfer.roofline.source"] != "stored" {
				t.Errorf("cache roof %v %v", dp.DoubleValue(), a)
			}
		}
		if mt := ms.At(i); mt.Name() == "ggml.op.count" {
			a := mt.Sum().DataPoints().At(0).Attributes().AsRaw()
			found = a["ggml.weight.type"] == "q4_0" && a["ggml.tensor.type"] == "f32"
			if !found {
				t.Errorf("ggml.op.count attributes %v", a)
			}
		}
	}
	if !found {
		t.Error("no ggml.op.count")
	}
}

// Counter deltas reach node spans only when every thread share has them, and the
// hardware ones classify the node; per-thread sums split nodes from time outside them.
func TestCounters(t *testing.T) {
	var cs []perfcount.Counter
	for _, n := range []string{"task-clock", "cycles", "instructions", "cache-misses"} {
		c, _ := perfcount.Parse(n)
		cs = append(cs, c)
	}
	ctr := NewCounters(cs)
	full := &assemble.Node{Info: &assemble.NodeInfo{Op: "MUL_MAT", Type: "f32"}, Start: 10, End: 20, Counted: 2,
		Counters: events.Counters{900, 2000, 1000, 30},
		Threads: []assemble.ThreadTime{
			{TID: 7, Counted: true, Counters: events.Counters{500, 1000, 600, 20}},
			{TID: 8, Counted: true, Counters: events.Counters{400, 1000, 400, 10}}}}
	part := &assemble.Node{Info: &assemble.NodeInfo{Op: "ADD", Type: "f32"}, Start: 20, End: 30, Counted: 1,
		Counters: events.Counters{50}, Threads: []assemble.ThreadTime{{TID: 7, Counted: true, Counters: events.Counters{50}}, {TID: 8}}}
	g := &assemble.Graph{NThreads: 2, Start: 5, End: 35, Traced: true, Nodes: []*assemble.Node{full, part},
		Outside: []assemble.ThreadCounters{{TID: 7, Counters: events.Counters{100}}}}

	td := ptrace.NewTraces()
	NewSpans(Clock{}, true, roofline.Peaks{}, ctr).Graph(td, &Origin{PID: 1, Exe: "x"}, g)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	a := spans.At(1).Attributes().AsRaw()
	if a["perf.task_clock"] != int64(900) || a["perf.cache_misses"] != int64(30) ||
		a["ggml.counters.bound"] != "memory" || a["ggml.counters.ipc"] != 0.5 || a["ggml.counters.llc_mpki"] != 30.0 {
		t.Errorf("fully counted node: %v", a)
	}
	if a := spans.At(2).Attributes().AsRaw(); a["perf.task_clock"] != nil {
		t.Errorf("partly counted node has counters: %v", a)
	}

	m := NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, ctr)
	m.Graph(&Origin{PID: 1, Exe: "x"}, g)
	md := m.Emit(Telemetry{})
	got := map[string]int64{}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		mt := ms.At(i)
		if !strings.HasPrefix(mt.Name(), "ggml.thread.counter") && !strings.HasPrefix(mt.Name(), "ggml.op.counter") {
			continue
		}
		for j := 0; j < mt.Sum().DataPoints().Len(); j++ {
			dp := mt.Sum().DataPoints().At(j)
			k := mt.Name()
			dp.Attributes().Range(func(key string, v pcommon.Value) bool {
				k += " " + v.AsString()
				return true
			})
			got[k] = dp.IntValue()
		}
	}
	for k, want := range map[string]int64{
		"ggml.thread.counter 7 task-clock node":         550,
		"ggml.thread.counter 7 task-clock outside":      100,
		"ggml.thread.counter 8 task-clock node":         400,
		"ggml.op.counter MUL_MAT none f32 task-clock":   900,
		"ggml.op.counters.bound MUL_MAT memory":         1,
		"ggml.op.counter MUL_MAT none f32 instructions": 1000,
	} {
		if got[k] != want {
			t.Errorf("%s = %d, want %d", k, got[k], want)
		}
	}
	if _, ok := got["ggml.op.counter ADD none f32 task-clock"]; ok {
		t.Error("a partly counted op has ggml.op.counter")
	}
}

// A decode that offloads: the CPU graph nests in the CPU split, splits and copies in the
// decode; the metrics sum them by backend; a process that exited is emitted once
// more, then dropped.
func TestOffload(t *testing.T) {
	d := &assemble.Step{PID: 1, TID: 1, Tokens: 1, Start: 0, End: 100,
		Splits: []assemble.Split{{TID: 1, Backend: "CPU", NNodes: 4, Start: 10, End: 40}, {TID: 1, Backend: "RPC", NNodes: 5, Start: 60, End: 70}},
		Copies: []assemble.Copy{{TID: 1, Src: "CPU", Dst: "RPC", Tensor: "l_out-7", Bytes: 8192, Start: 45, End: 55}},
		Graphs: []*assemble.Graph{{TID: 1, NNodes: 4, NThreads: 2, Start: 12, End: 38}},
	}
	p := &Origin{PID: 1, Exe: "x", CtxSize: 1024, CtxThreads: 2}
	td := ptrace.NewTraces()
	NewSpans(Clock{}, true, roofline.Peaks{}, nil).Step(td, p, d)
	res := td.ResourceSpans().At(0).Resource().Attributes().AsRaw()
	if res["llama.context.size"] != int64(1024) || res["llama.context.threads"] != int64(2) {
		t.Errorf("resource %v", res)
	}
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	byName := map[string][]ptrace.Span{}
	for i := 0; i < spans.Len(); i++ {
		byName[spans.At(i).Name()] = append(byName[spans.At(i).Name()], spans.At(i))
	}
	dec := byName["llama_decode"][0]
	splits, cp, g := byName["ggml.backend.graph_compute"], byName["ggml.backend.tensor_copy"], byName["ggml.graph_compute"]
	if len(splits) != 2 || len(cp) != 1 || len(g) != 1 {
		t.Fatalf("spans %v", byName)
	}
	for _, s := range append(splits, cp[0]) {
		if s.ParentSpanID() != dec.SpanID() {
			t.Errorf("%s not under the decode", s.Name())
		}
	}
	if g[0].ParentSpanID() != splits[0].SpanID() {
		t.Error("the CPU graph is not under the CPU split")
	}
	if a := cp[0].Attributes().AsRaw(); a["ggml.backend.source"] != "CPU" || a["ggml.backend.destination"] != "RPC" || a["ggml.copy.bytes"] != int64(8192) {
		t.Errorf("copy %v", a)
	}
	if a := splits[1].Attributes().AsRaw(); a["ggml.backend"] != "RPC" || a["ggml.graph.nodes"] != int64(5) {
		t.Errorf("RPC split %v", a)
	}

	m := NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, nil)
	m.Step(p, d)
	m.Step(p, d)
	m.Forget(1)
	got := map[string]float64{}
	ms := m.Emit(Telemetry{}).ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		mt := ms.At(i)
		if !strings.HasPrefix(mt.Name(), "ggml.backend.") {
			continue
		}
		for j := 0; j < mt.Sum().DataPoints().Len(); j++ {
			dp := mt.Sum().DataPoints().At(j)
			k := mt.Name()
			dp.Attributes().Range(func(_ string, v pcommon.Value) bool {
				k += " " + v.AsString()
				return true
			})
			got[k] = dp.DoubleValue() + float64(dp.IntValue())
		}
	}
	for k, want := range map[string]float64{
		"ggml.backend.split.count CPU":    2,
		"ggml.backend.split.count RPC":    2,
		"ggml.backend.split.time RPC":     20e-9,
		"ggml.backend.copy.bytes CPU RPC": 16384,
		"ggml.backend.copy.time CPU RPC":  20e-9,
	} {
		if math.Abs(got[k]-want) > 1e-15 {
			t.Errorf("%s = %g, want %g", k, got[k], want)
		}
	}
	if n := m.Emit(Telemetry{}).ResourceMetrics().Len(); n != 1 { // the receiver's own only
		t.Errorf("an exited process still emitted: %d resources", n)
	}
}

// A device's own node times: summed on every device span, the nodes its events only
// where the split's nodes were read (a window), and counted by op in the metric.
func TestDeviceTimed(t *testing.T) {
	mm, add := &assemble.NodeInfo{Op: "MUL_MAT", Name: "ffn_up-0"}, &assemble.NodeInfo{Op: "ADD"}
	timed := []assemble.TimedNode{{Info: mm, Label: "MUL_MAT_VEC q4_0", NS: 300, Known: true}, {Info: add, Label: "ADD", NS: 0}, {Info: mm, Label: "MUL_MAT_VEC q4_0", NS: 200, Known: true}}
	d := &assemble.Step{PID: 1, TID: 1, Tokens: 1, Start: 0, End: 100,
		Splits: []assemble.Split{
			{TID: 1, Backend: "VK", NNodes: 3, Start: 10, End: 20, Device: true, Done: 90, Timed: timed},
			{TID: 1, Backend: "VK", NNodes: 3, Start: 30, End: 40, Device: true, Done: 95, Timed: timed, Nodes: []*assemble.NodeInfo{mm, add, mm}},
		}}
	p := &Origin{PID: 1, Exe: "x"}
	td := ptrace.NewTraces()
	NewSpans(Clock{}, true, roofline.Peaks{}, nil).Step(td, p, d)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	var devs []ptrace.Span
	for i := 0; i < spans.Len(); i++ {
		if spans.At(i).Name() == "ggml.device.compute" {
			devs = append(devs, spans.At(i))
		}
	}
	if len(devs) != 2 {
		t.Fatalf("%d device spans", len(devs))
	}
	for i, sp := range devs {
		a := sp.Attributes().AsRaw()
		if a["ggml.graph.nodes.timed"] != int64(2) || a["ggml.device.timed_ns"] != int64(500) {
			t.Errorf("device span %d: %v", i, a)
		}
	}
	if n := devs[0].Events().Len(); n != 0 {
		t.Errorf("a split outside a window has %d node events", n)
	}
	evs := devs[1].Events()
	if evs.Len() != 3 {
		t.Fatalf("%d node events, want 3", evs.Len())
	}
	first, second := evs.At(0).Attributes().AsRaw(), evs.At(1).Attributes().AsRaw()
	if first["ggml.device.node_ns"] != int64(300) || first["ggml.device.label"] != "MUL_MAT_VEC q4_0" || first["ggml.op"] != "MUL_MAT" {
		t.Errorf("first node event %v", first)
	}
	if _, ok := second["ggml.device.node_ns"]; ok {
		t.Errorf("a node whose time was lost has one: %v", second)
	}
	m := NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, nil)
	m.Step(p, d)
	ms := m.Emit(Telemetry{}).ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	found := false
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Name() != "ggml.backend.device.op.time" {
			continue
		}
		dps := ms.At(i).Sum().DataPoints()
		for j := 0; j < dps.Len(); j++ {
			op, _ := dps.At(j).Attributes().Get("ggml.op")
			if op.Str() == "MUL_MAT" {
				found = math.Abs(dps.At(j).DoubleValue()-1000e-9) < 1e-15
			}
			if op.Str() == "ADD" {
				t.Errorf("an untimed op has device time %g", dps.At(j).DoubleValue())
			}
		}
	}
	if !found {
		t.Error("ggml.backend.device.op.time{MUL_MAT} is not the 1 µs of both splits")
	}
}

// resource_attributes.<name>.enabled: false leaves the attribute off spans and metrics
// alike, and both carry one scope name.
func TestResourceAttributeSwitches(t *testing.T) {
	mcfg := metadata.DefaultMetricsBuilderConfig()
	mcfg.ResourceAttributes.ProcessExecutablePath.Enabled = false
	p := &Origin{PID: 3, Exe: "/opt/llama/llama-server", GGML: "0.25.1"}
	s := NewSpans(Clock{}, false, roofline.Peaks{}, nil)
	s.Resources = mcfg.ResourceAttributes
	td := ptrace.NewTraces()
	s.Step(td, p, &assemble.Step{PID: 3, TID: 3, Tokens: 1, Start: 1, End: 2})
	m := NewMetrics(mcfg, receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, nil)
	m.Step(p, &assemble.Step{PID: 3, TID: 3, Tokens: 1, Start: 1, End: 2})
	md := m.Emit(Telemetry{})
	var metricRes pcommon.Resource
	var metricScope string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		if _, ok := md.ResourceMetrics().At(i).Resource().Attributes().Get("process.pid"); ok {
			metricRes = md.ResourceMetrics().At(i).Resource()
			metricScope = md.ResourceMetrics().At(i).ScopeMetrics().At(0).Scope().Name()
		}
	}
	spanScope := td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().Name()
	for what, res := range map[string]pcommon.Resource{"span": td.ResourceSpans().At(0).Resource(), "metric": metricRes} {
		a := res.Attributes().AsRaw()
		if _, ok := a["process.executable.path"]; ok {
			t.Errorf("%s resource has the disabled process.executable.path: %v", what, a)
		}
		if a["service.name"] != "llama-server" || a["ggml.version"] != "0.25.1" || a["process.pid"] != int64(3) {
			t.Errorf("%s resource lacks enabled attributes: %v", what, a)
		}
	}
	if spanScope != metricScope || spanScope != metadata.ScopeName {
		t.Errorf("scopes: spans %q, metrics %q", spanScope, metricScope)
	}
}

// A run's setup is on its resource: the build, the context's batch sizes, the CPU
// variant, its SIMD and the CPU's, and the OS; what is unknown is absent, but os.type,
// always linux.
func TestResourceSetup(t *testing.T) {
	p := &Origin{PID: 1, Exe: "/opt/llama/llama-bench", CtxSize: 256, CtxThreads: 2, CtxBatch: 64, CtxUbatch: 32,
		LlamaBuild: 7112, LlamaCommit: "de3ff81", CPUVariant: "zen4", SIMD: "sse2", HostSIMD: "avx512_vnni",
		OSVersion: "6.8.0-49-generic"}
	want := map[string]any{
		schema.ResourceLlamaContextBatchSize: int64(64), schema.ResourceLlamaContextUbatchSize: int64(32),
		schema.ResourceLlamaBuildNumber: int64(7112), schema.ResourceLlamaBuildCommit: "de3ff81",
		schema.ResourceGGMLCPUVariant: "zen4", schema.ResourceGGMLCPUSIMD: "sse2", schema.ResourceHostCPUSIMD: "avx512_vnni",
		"os.type": "linux", schema.ResourceOSVersion: "6.8.0-49-generic",
	}
	got := p.Resource(metadata.NewResourceBuilder(metadata.DefaultResourceAttributesConfig())).Attributes().AsRaw()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	got = (&Origin{PID: 1, Exe: "/usr/bin/node"}).Resource(metadata.NewResourceBuilder(metadata.DefaultResourceAttributesConfig())).Attributes().AsRaw()
	for k := range want {
		if _, ok := got[k]; ok != (k == "os.type") {
			t.Errorf("unknown setup: %s = %v", k, got[k])
		}
	}
}

// A process's spans share one resource in a batch while its origin stays the same.
func TestResourceOncePerBatch(t *testing.T) {
	a, b := &Origin{PID: 1, Exe: "/bin/a"}, &Origin{PID: 2, Exe: "/bin/b"}
	s := NewSpans(Clock{}, false, roofline.Peaks{}, nil)
	d := func(pid uint32) *assemble.Step {
		return &assemble.Step{PID: pid, TID: pid, Tokens: 1, Start: 1, End: 2}
	}
	resources := func(td ptrace.Traces) (pids []int64, spans []int) {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			pid, _ := rs.Resource().Attributes().Get("process.pid")
			pids = append(pids, pid.Int())
			spans = append(spans, rs.ScopeSpans().At(0).Spans().Len())
		}
		return pids, spans
	}
	td := ptrace.NewTraces()
	s.Step(td, a, d(1))
	s.Step(td, b, d(2))
	s.Step(td, a, d(1))
	a.CtxSize = 512 // a context read: a new resource
	s.Step(td, a, d(1))
	pids, spans := resources(td)
	if !slices.Equal(pids, []int64{1, 2, 1}) || !slices.Equal(spans, []int{2, 1, 1}) {
		t.Fatalf("resources' pids %v with %v spans; want [1 2 1] with [2 1 1]", pids, spans)
	}
	if got, _ := td.ResourceSpans().At(2).Resource().Attributes().Get("llama.context.size"); got.Int() != 512 {
		t.Errorf("the changed origin's resource: context size %v", got.AsRaw())
	}
	next := ptrace.NewTraces() // the next batch starts its own
	s.Step(next, a, d(1))
	if pids, spans = resources(next); !slices.Equal(pids, []int64{1}) || !slices.Equal(spans, []int{1}) {
		t.Fatalf("next batch: pids %v with %v spans", pids, spans)
	}
}

// A graph carries its threads' CPU time, and its nodes are starved when the process's
// threads lacked a CPU over its latest graphs: on the spans and in the metrics. A graph
// that ran while the collector was busy is marked, and left out of the metrics.
func TestGraphCPU(t *testing.T) {
	peaks := roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9}
	node := &assemble.Node{Info: &assemble.NodeInfo{Op: "ADD", Name: "x", Type: "f32", Work: roofline.Work{FLOPs: 1e6, Bytes: 1e6}}, Start: 1000, End: 2000}
	d := &assemble.Step{PID: 1, TID: 1, Tokens: 1, Start: 0, End: 12000, Graphs: []*assemble.Graph{{
		TID: 1, NNodes: 1, NThreads: 2, Start: 100, End: 10100, Traced: true, Nodes: []*assemble.Node{node},
		CPU: assemble.GraphCPU{Known: true, Run: 12000, Wait: 7000, Starved: true},
	}}}
	td := ptrace.NewTraces()
	NewSpans(Clock{}, true, peaks, nil).Step(td, &Origin{PID: 1, Exe: "x"}, d)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	g, n := spans.At(1).Attributes().AsRaw(), spans.At(2).Attributes().AsRaw()
	if g["ggml.graph.on_cpu_ns"] != int64(12000) || g["ggml.graph.runqueue_ns"] != int64(7000) || g["ggml.graph.on_cpu_share"] != 0.6 {
		t.Errorf("graph attributes %v", g)
	}
	if n["ggml.roofline.bound"] != "starved" {
		t.Errorf("a node of a starved process judged %v", n["ggml.roofline.bound"])
	}
	m := NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{Peaks: peaks}, nil)
	m.Step(&Origin{PID: 1, Exe: "x"}, d)
	got := map[string]float64{}
	ms := m.Emit(Telemetry{}).ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		switch mt := ms.At(i); mt.Name() {
		case "ggml.graph.threads.cpu.time", "ggml.graph.threads.time":
			dp := mt.Sum().DataPoints().At(0)
			if v, _ := dp.Attributes().Get("llama.phase"); v.Str() == "decode" {
				got[mt.Name()] = dp.DoubleValue()
			}
		case "ggml.op.bound":
			a := mt.Sum().DataPoints().At(0).Attributes().AsRaw()
			got[a["ggml.roofline.bound"].(string)]++
		}
	}
	if got["ggml.graph.threads.cpu.time"] != 12e-6 || got["ggml.graph.threads.time"] != 20e-6 || got["starved"] != 1 {
		t.Errorf("metrics %v", got)
	}
	// Not starved over the latest graphs, the node is judged by its time; perturbed,
	// the graph says so, and its CPU time is not in the metrics.
	d.Graphs[0].CPU.Starved, d.Graphs[0].CPU.Perturbed = false, true
	td = ptrace.NewTraces()
	NewSpans(Clock{}, true, peaks, nil).Step(td, &Origin{PID: 1, Exe: "x"}, d)
	spans = td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	if b, _ := spans.At(2).Attributes().Get("ggml.roofline.bound"); b.Str() == "starved" {
		t.Error("a node judged starved where its process's latest graphs were not")
	}
	if p, _ := spans.At(1).Attributes().Get("ggml.graph.on_cpu_perturbed"); !p.Bool() {
		t.Errorf("a perturbed graph's attributes: %v", spans.At(1).Attributes().AsRaw())
	}
	m = NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{Peaks: peaks}, nil)
	m.Step(&Origin{PID: 1, Exe: "x"}, d)
	ms = m.Emit(Telemetry{}).ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		if name := ms.At(i).Name(); name == "ggml.graph.threads.cpu.time" || name == "ggml.graph.threads.time" {
			t.Errorf("%s from a perturbed graph", name)
		}
	}
}
