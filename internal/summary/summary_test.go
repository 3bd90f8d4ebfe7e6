package summary

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/cgroup"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/signals"
	"github.com/profinfer/profinfer/internal/watch"
)

var peaks = roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9}

func node(op, name, weight string, start, end uint64, flops, bytes float64) *assemble.Node {
	info := &assemble.NodeInfo{Op: op, Name: name, Type: "f32", Shape: [4]int64{2048, 1, 1, 1}, Work: roofline.Work{FLOPs: flops, Bytes: bytes}}
	if weight != "" {
		info.Srcs = []assemble.Src{assemble.NewSrc(weight, [4]int64{2048, 2048, 1, 1})}
	}
	return &assemble.Node{Info: info, Start: start, End: end}
}

// decodeOf is a decode of tokens whose one traced graph runs the nodes, all spans built
// by the receiver's own span builder.
func decodeOf(tokens int, start uint64, nodes ...*assemble.Node) *assemble.Step {
	end := nodes[len(nodes)-1].End
	return &assemble.Step{PID: 1, TID: 1, Tokens: tokens, Start: start, End: end + 10,
		Graphs: []*assemble.Graph{{TID: 1, NNodes: len(nodes), NThreads: 2, Start: start + 1, End: end + 5, Traced: true, Nodes: nodes}}}
}

func traces(p *signals.Origin, ds ...*assemble.Step) ptrace.Traces {
	s := signals.NewSpans(signals.Clock{Offset: 1e18}, true, peaks, nil)
	td := ptrace.NewTraces()
	for _, d := range ds {
		s.Step(td, p, d)
	}
	return td
}

var server = &signals.Origin{PID: 7, VPID: 7, Exe: "/bin/llama-server"}

func TestFold(t *testing.T) {
	a := New()
	// A prefill of 32 tokens: a q4_0 matmul of layer 0 taking 3/4 of the nodes' time.
	a.Traces(traces(server, decodeOf(32, 1000,
		node("MUL_MAT", "Qcur-0", "q4_0", 1010, 1310, 60e9*300e-9, 10e9*300e-9),
		node("ADD", "ffn_out-0", "", 1310, 1410, 1e3, 2e9*100e-9))))
	// Four decodes of one token, each 1 ms.
	for i := range 4 {
		st := uint64(1e6 * (i + 1))
		a.Traces(traces(server, decodeOf(1, st, node("MUL_MAT", "Qcur-1", "q4_0", st+10, st+1e6-20, 1e6, 18e9*1e-3))))
	}
	v := a.Snapshot()
	if len(v.Processes) != 1 {
		t.Fatalf("%d processes", len(v.Processes))
	}
	p := v.Processes[0]
	if p.Title != "llama-server (pid 7)" {
		t.Errorf("title %q", p.Title)
	}
	if len(p.Phases) != 2 || p.Phases[0].Name != "prefill" || p.Phases[1].Name != "decode" {
		t.Fatalf("phases %+v", p.Phases)
	}
	pre, dec := p.Phases[0], p.Phases[1]
	if pre.Tokens != 32 || pre.Decodes != 1 || dec.Tokens != 4 || dec.Decodes != 4 || dec.TracedGraphs != 4 {
		t.Errorf("counts: prefill %+v decode %+v", pre, dec)
	}
	if len(pre.Ops) != 2 || pre.Ops[0].Op != "MUL_MAT" || pre.Ops[0].Weight != "q4_0" || pre.Ops[1].Weight != "none" {
		t.Fatalf("prefill ops %+v %+v", pre.Ops[0], pre.Ops[1])
	}
	mm := pre.Ops[0]
	graph := float64(1410+5-1001) / 1e9
	if mm.Calls != 1 || math.Abs(mm.TotalMS-300e-6) > 1e-12 || math.Abs(mm.Share-300e-9/graph) > 1e-9 {
		t.Errorf("prefill matmul %+v, graph %g s", mm, graph)
	}
	// 60 GFLOP/s against a 100 G roof at 6 FLOP/byte, above the ridge of 5: 60% of the
	// compute roof, but one call of 300 ns is too little for a verdict.
	if mm.Bound != "" || mm.Why != "not judged: 1 call, 0.00 ms (a verdict needs 4 calls or 0.2 ms)" ||
		math.Abs(mm.FLOPS-60e9) > 1 || math.Abs(mm.PeakFrac-0.6) > 1e-9 || mm.Roof != BoundCompute {
		t.Errorf("prefill matmul verdict %+v", mm)
	}
	if len(pre.Layers) != 1 || pre.Layers[0].Layer != 0 || pre.OpLayer == nil || len(pre.OpLayer.Ops) != 2 {
		t.Errorf("layers %+v op×layer %+v", pre.Layers, pre.OpLayer)
	}
	dm := dec.Ops[0]
	if dm.Bound != "memory" || math.Abs(dm.PeakFrac-dm.Bandwidth/20e9) > 1e-9 || dm.Calls != 4 {
		t.Errorf("decode matmul %+v", dm)
	}
	if p.Latency.Count != 4 || math.Abs(p.Latency.P50-1.0)/1.0 > 0.05 {
		t.Errorf("latency %+v", p.Latency)
	}
	if p.Roofs.Bandwidth != 20e9 || p.Roofs.FLOPS != 100e9 {
		t.Errorf("roofs derived from spans %+v", p.Roofs)
	}
	if tl := p.Timeline; tl == nil || tl.Phase != "decode" || len(tl.Nodes) != 1 || tl.Tokens != 1 {
		t.Errorf("timeline %+v", p.Timeline)
	}
	if dec.TokensPerSec < 990 || dec.TokensPerSec > 1001 {
		t.Errorf("decode tokens/s %g", dec.TokensPerSec)
	}
}

// Nodes whose decode came in an earlier batch keep its phase; a graph no decode holds
// is "outside decode".
func TestPhaseAcrossBatches(t *testing.T) {
	td := traces(server, decodeOf(8, 1000, node("MUL_MAT", "x-0", "q8_0", 1010, 1100, 1, 1)))
	first, second := ptrace.NewTraces(), ptrace.NewTraces()
	rs := td.ResourceSpans().At(0)
	for _, out := range []ptrace.Traces{first, second} {
		o := out.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(o.Resource())
		o.ScopeSpans().AppendEmpty()
	}
	spans := rs.ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		dst := first
		if spans.At(i).Name() != "llama_decode" {
			dst = second
		}
		spans.At(i).CopyTo(dst.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty())
	}
	a := New()
	a.Traces(first)
	a.Traces(second)
	g := &assemble.Graph{TID: 3, NThreads: 1, Start: 5000, End: 6000, Traced: true, Nodes: []*assemble.Node{node("ADD", "y", "", 5001, 5900, 1, 1)}}
	out := ptrace.NewTraces()
	signals.NewSpans(signals.Clock{}, true, peaks, nil).Graph(out, server, g)
	a.Traces(out)
	p := a.Snapshot().Processes[0]
	if len(p.Phases) != 2 || p.Phases[0].Name != "prefill" || p.Phases[0].Ops[0].Weight != "q8_0" || p.Phases[1].Name != "outside decode" {
		t.Fatalf("phases %+v", p.Phases)
	}
}

func TestMetrics(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	server.Resource(metadata.NewResourceBuilder(metadata.DefaultResourceAttributesConfig())).MoveTo(rm.Resource())
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("profinfer.roofline.peak")
	g.SetEmptyGauge()
	for roof, v := range map[string]float64{"flops": 2e11, "bandwidth": 5e10, "int8": 8e11, "bf16": 4e11} {
		dp := g.Gauge().DataPoints().AppendEmpty()
		dp.SetDoubleValue(v)
		dp.Attributes().PutStr("ggml.roofline.roof", roof)
		dp.Attributes().PutStr("profinfer.roofline.source", "stored")
		dp.Attributes().PutStr("profinfer.roofline.measured", "2026-11-23T10:00:00Z")
	}
	caches := ms.AppendEmpty()
	caches.SetName("profinfer.roofline.cache.bandwidth")
	caches.SetEmptyGauge()
	for _, l := range []roofline.Level{{Name: "L2", Size: 2 << 20, Bandwidth: 2e11}, {Name: "L1", Size: 64 << 10, Bandwidth: 3e11}} {
		dp := caches.Gauge().DataPoints().AppendEmpty()
		dp.SetDoubleValue(l.Bandwidth)
		dp.Attributes().PutStr("profinfer.roofline.cache.level", l.Name)
		dp.Attributes().PutInt("profinfer.roofline.cache.size", l.Size)
	}
	sel := ms.AppendEmpty()
	sel.SetName("ggml.moe.expert.selections")
	sel.SetEmptySum()
	for e, n := range []int64{10, 0, 0, 2} {
		dp := sel.Sum().DataPoints().AppendEmpty()
		dp.SetIntValue(n)
		dp.Attributes().PutInt("ggml.layer", 3)
		dp.Attributes().PutInt("ggml.moe.expert", int64(e))
	}
	cpus := ms.AppendEmpty()
	cpus.SetName("profinfer.process.cpus")
	cpus.SetEmptyGauge()
	dp := cpus.Gauge().DataPoints().AppendEmpty()
	dp.SetIntValue(2)
	dp.Attributes().PutStr("profinfer.cpus.kind", "allowed")
	times := ms.AppendEmpty()
	times.SetName("profinfer.process.cpus.time")
	times.SetEmptySum()
	for of, s := range map[string]float64{"idle": 4, "all": 10, "process": 5} {
		dp := times.Sum().DataPoints().AppendEmpty()
		dp.SetDoubleValue(s)
		dp.Attributes().PutStr("profinfer.cpus.time.of", of)
	}
	a := New()
	a.Metrics(md)
	p := a.Snapshot().Processes[0]
	// Of 10 s of its 2 CPUs' time, 4 idle and 5 its own: 0.8 CPUs idle, 0.2 others'.
	if c := p.CPUs; c == nil || !c.Measured || !c.OthersMeasured || math.Abs(c.Idle-0.8) > 1e-9 || math.Abs(c.Others-0.2) > 1e-9 {
		t.Errorf("cpus %+v", p.CPUs)
	}
	want := []roofline.Level{{Name: "L1", Size: 64 << 10, Bandwidth: 3e11}, {Name: "L2", Size: 2 << 20, Bandwidth: 2e11}}
	if r := p.Roofs; r.FLOPS != 2e11 || r.Bandwidth != 5e10 || r.Int8 != 8e11 || r.BF16 != 4e11 || r.Source != "stored" || r.Measured == "" ||
		!slices.Equal(r.Caches, want) {
		t.Errorf("roofs %+v", p.Roofs)
	}
	if len(p.MoE) != 1 || p.MoE[0].Layer != 3 || len(p.MoE[0].Selections) != 4 || p.MoE[0].Imbalance < 1 {
		t.Errorf("moe %+v", p.MoE)
	}
}

// However long it runs, the state stays bounded: processes, ops per phase, traces
// remembered, rate history.
func TestBounded(t *testing.T) {
	a := New()
	for pid := range 3 * maxProcesses {
		p := &signals.Origin{PID: pid + 1, Exe: "/x"}
		var nodes []*assemble.Node
		if pid == 0 {
			for i := range 2 * maxOps {
				nodes = append(nodes, node(fmt.Sprintf("OP%d", i), "t", "", uint64(100+2*i), uint64(101+2*i), 1, 1))
			}
		} else {
			nodes = []*assemble.Node{node("ADD", "t", "", 100, 101, 1, 1)}
		}
		a.Traces(traces(p, decodeOf(1, 99, nodes...)))
		if pid == 0 {
			if ops := len(a.Snapshot().Processes[0].Phases[0].Ops); ops != maxOps+1 {
				t.Errorf("%d op rows, want %d and other", ops, maxOps)
			}
		}
	}
	if n := len(a.procs); n != maxProcesses {
		t.Errorf("%d processes kept", n)
	}
	if n := len(a.phases.byTrace); n > maxTraces {
		t.Errorf("%d traces remembered", n)
	}
	var p proc
	for s := range int64(3 * rateSeconds) {
		p.addRate(s, decode, 1)
	}
	p.addRate(0, decode, 1) // far in the past: dropped
	if len(p.rate) != rateSeconds || p.rate[0].Time != 2*rateSeconds {
		t.Errorf("rate history %d seconds from %d", len(p.rate), p.rate[0].Time)
	}
}

// The live view forgets the processes not seen for a while (Expire): those whose spans
// and metrics stopped coming. A process that sends metrics alone, computing nothing, is
// still seen; metrics of a process the view does not have add none.
func TestExpire(t *testing.T) {
	a := New()
	now := time.Unix(1_000_000, 0)
	a.now = func() time.Time { return now }
	idle := &signals.Origin{PID: 8, VPID: 8, Exe: "/bin/llama-server"}
	bench := &signals.Origin{PID: 9, VPID: 9, Exe: "/bin/llama-bench"}
	for _, p := range []*signals.Origin{server, idle, bench} {
		a.Traces(traces(p, decodeOf(1, 1000, node("ADD", "x", "", 1010, 1020, 1, 1))))
	}
	acc := signals.NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, nil)
	acc.Step(idle, decodeOf(1, 1000, node("ADD", "x", "", 1010, 1020, 1, 1)))
	acc.Step(&signals.Origin{PID: 10, Exe: "/bin/other"}, decodeOf(1, 1000, node("ADD", "x", "", 1010, 1020, 1, 1)))
	now = now.Add(50 * time.Minute)
	a.Traces(traces(server, decodeOf(1, 2000, node("ADD", "x", "", 2010, 2020, 1, 1)))) // still computing
	a.Metrics(acc.Emit(signals.Telemetry{}))                                            // idle, but still there
	now = now.Add(20 * time.Minute)
	if n := a.Expire(now.Add(-time.Hour)); n != 1 {
		t.Errorf("%d processes forgotten, want 1", n)
	}
	var titles []string
	for _, p := range a.Snapshot().Processes {
		titles = append(titles, p.Title)
	}
	slices.Sort(titles)
	if want := []string{"llama-server (pid 7)", "llama-server (pid 8)"}; !slices.Equal(titles, want) {
		t.Errorf("processes %q, want %q: the bench not seen for 70 minutes forgotten, the others kept", titles, want)
	}
}

func TestLatencyQuantiles(t *testing.T) {
	h := newLogHistogram()
	for i := 1; i <= 1000; i++ {
		h.add(float64(i) * 1e-3)
	}
	q := h.quantiles()
	for _, c := range []struct{ got, want float64 }{{q.P50, 500}, {q.P90, 900}, {q.P99, 990}, {q.Max, 1000}} {
		if math.Abs(c.got-c.want)/c.want > 0.05 {
			t.Errorf("quantile %g ms, want %g within 5%%", c.got, c.want)
		}
	}
}

// A span from another receiver (no ggml.op) is not a node.
func TestForeignSpans(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "web")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("GET /")
	s.SetStartTimestamp(pcommon.Timestamp(1))
	s.SetEndTimestamp(pcommon.Timestamp(2))
	a := New()
	a.Traces(td)
	if p := a.Snapshot().Processes[0]; len(p.Phases) != 0 {
		t.Errorf("phases from a foreign span: %+v", p.Phases)
	}
}

// A node whose last thread left late (preempted at the barrier) overlaps the next one;
// its time counts until the next node's start, so that the shares add up to at most
// the graph's time.
func TestOverlappingNodes(t *testing.T) {
	a := New()
	a.Traces(traces(server, decodeOf(1, 1000,
		node("MUL_MAT", "a-0", "q4_0", 1010, 5000, 1, 1), // its last thread left at 5000
		node("ADD", "b-0", "", 1100, 1200, 1, 1))))
	ph := a.Snapshot().Processes[0].Phases[0]
	var sum float64
	for _, o := range ph.Ops {
		sum += o.Share
		if o.Op == "MUL_MAT" && math.Abs(o.TotalMS-90e-6) > 1e-12 {
			t.Errorf("MUL_MAT %g ms, want its 90 ns up to the next node", o.TotalMS)
		}
	}
	if sum > 1 {
		t.Errorf("shares add up to %g", sum)
	}
}

// BenchmarkFold folds one decode of 300 traced nodes, as the live view does for every
// batch the pipeline hands it.
func BenchmarkFold(b *testing.B) {
	var nodes []*assemble.Node
	for i := range 300 {
		st := uint64(1000 + 100*i)
		nodes = append(nodes, node("MUL_MAT", fmt.Sprintf("ffn_up-%d", i%16), "q4_0", st, st+90, 1e6, 1e5))
	}
	td := traces(server, decodeOf(1, 900, nodes...))
	a := New()
	b.ReportAllocs()
	for b.Loop() {
		a.Traces(td)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/300, "ns/span")
}

// Request spans, as the receiver's span builder makes them, fold into the process's
// requests: counts, tokens and time to first token and per output token.
func TestRequests(t *testing.T) {
	s := signals.NewSpans(signals.Clock{Offset: 1e18}, true, peaks, nil)
	td := ptrace.NewTraces()
	for i := range 10 {
		r := &requests.Request{PID: 7, Seq: int32(i % 4), Start: 0, FirstToken: uint64(100+10*i) * 1e6, End: 2e9,
			Prompt: 20, Cached: 10 * i, Output: 11, GapSum: 10 * 50e6, GapMax: 60e6, Decodes: 11, SharedMax: i % 4, Ended: requests.Idle}
		s.Request(td, server, r)
	}
	a := New()
	a.Traces(td)
	r := a.Snapshot().Processes[0].Requests
	if r == nil || r.Count != 10 || r.Input != 200 || r.Cached != 450 || r.Output != 110 || r.MaxShared != 3 {
		t.Fatalf("requests %+v", r)
	}
	if math.Abs(r.TTFT.P50-145)/145 > 0.05 || math.Abs(r.TPOT.P50-50)/50 > 0.05 {
		t.Errorf("ttft p50 %g ms, want 145; tpot p50 %g ms, want 50", r.TTFT.P50, r.TPOT.P50)
	}
	if len(a.Snapshot().Processes[0].Phases) != 0 {
		t.Error("request spans made a phase")
	}
}

// A request that computed a prompt start an earlier one computed counts as recomputed,
// with the earlier one's tokens; not where the cache was cleared between them, nor where
// the start came from the cache (no hash), nor the first of a start.
func TestRecomputedPrompts(t *testing.T) {
	s := signals.NewSpans(signals.Clock{Offset: 1e18}, true, peaks, nil)
	td := ptrace.NewTraces()
	turn := func(prefix uint32, prefixTokens, prompt, cached int, end requests.End) {
		s.Request(td, server, &requests.Request{PID: 7, Start: 0, FirstToken: 1e8, End: 1e9, Prompt: prompt, Cached: cached, Output: 20,
			Decodes: 20, PrefixTokens: prefixTokens, Prefix: prefix, Ended: end})
	}
	turn(0xa, 64, 100, 0, requests.Rewound) // a conversation's first turn
	turn(0xa, 64, 150, 0, requests.Rewound) // its second, computed again: 120 tokens held before
	turn(0xa, 64, 200, 0, requests.Cleared) // the third, again: 170 held before
	turn(0xa, 64, 250, 0, requests.Rewound) // after the cache was cleared: not counted
	turn(0, 40, 60, 24, requests.Rewound)   // its start from the cache: no hash
	turn(0xb, 64, 80, 0, requests.Rewound)  // another start, first seen
	a := New()
	a.Traces(td)
	r := a.Snapshot().Processes[0].Requests
	if r == nil || r.Count != 6 || r.Recomputed != 2 || r.RecomputedTokens != 120+170 {
		t.Fatalf("requests %+v, want 2 recomputed holding 290 tokens", r)
	}
}

// Every graph's threads' CPU time folds into its phase: the share, the contended graphs
// and what they cost against the others' time per token. One verdict: the phase is
// starved, and so is every op in it; a phase that is not has no starved op, whatever its
// nodes said over their latest graphs. Graphs that ran beside the collector's own work
// are counted apart.
func TestThreadsCPU(t *testing.T) {
	a := New()
	ms := uint64(time.Millisecond)
	graph := func(i int, secs uint64, run uint64, cpu assemble.GraphCPU) {
		st := uint64(i+1) * 100 * ms
		d := decodeOf(1, st, node("MUL_MAT", "Qcur-1", "q4_0", st+10, st+secs-20, 1e6, 18e9*1e-3))
		d.Graphs[0].End = st + secs
		cpu.Known, cpu.Run, cpu.Wait = true, run, 2*secs-run
		d.Graphs[0].CPU = cpu
		a.Traces(traces(server, d))
	}
	for i := range 4 { // 10 ms a token, two threads on their CPUs throughout
		graph(i, 10*ms, 20*ms, assemble.GraphCPU{})
	}
	for i := 4; i < 6; i++ { // 30 ms a token, on a CPU half the time
		graph(i, 30*ms, 30*ms, assemble.GraphCPU{Starved: true})
	}
	graph(6, 30*ms, 1*ms, assemble.GraphCPU{Perturbed: true})
	ph := a.Snapshot().Processes[0].Phases[0]
	c := ph.CPU
	if c == nil || c.Graphs != 6 || c.Perturbed != 1 || c.Contended != 2 || math.Abs(c.Share-140.0/200) > 1e-6 || math.Abs(c.Cost-0.04) > 1e-6 || math.Abs(c.Wait-0.06) > 1e-6 || !c.Starved {
		t.Fatalf("phase CPU %+v, want 6 graphs and 1 perturbed, 2 contended, a share of 140/200 ms, a cost of 40 ms, starved", c)
	}
	for _, o := range ph.Ops {
		if o.Bound != "starved" {
			t.Errorf("op %s judged %s in a starved phase", o.Op, o.Bound)
		}
	}
	// Too few graphs had their CPUs to measure the cost against, and one graph short of
	// its CPUs is too little for a verdict: its starved nodes leave the op unjudged.
	a = New()
	graph(0, 10*ms, 20*ms, assemble.GraphCPU{})
	graph(1, 30*ms, 30*ms, assemble.GraphCPU{Starved: true})
	ph = a.Snapshot().Processes[0].Phases[0]
	if c := ph.CPU; c.Cost != 0 || c.Contended != 1 || c.Starved {
		t.Errorf("phase CPU %+v from one graph of each: no cost, not starved", c)
	}
	for _, o := range ph.Ops {
		if o.Bound == "starved" {
			t.Errorf("op %s judged starved in a phase that is not", o.Op)
		}
	}
	// Threads asleep half of each graph, not waiting for a CPU, with major page faults:
	// waiting for the disk, and every op is judged so.
	a = New()
	for i := range 4 {
		st := uint64(i+1) * 100 * ms
		d := decodeOf(1, st, node("MUL_MAT", "Qcur-1", "q4_0", st+10, st+30*ms-20, 1e6, 18e9*1e-3))
		d.Graphs[0].End = st + 30*ms
		d.Graphs[0].CPU = assemble.GraphCPU{Known: true, Run: 30 * ms, Wait: ms, MajFlt: 300}
		a.Traces(traces(server, d))
	}
	ph = a.Snapshot().Processes[0].Phases[0]
	if c := ph.CPU; c.MajorFaults != 1200 || !c.Starved || c.Lacked != LackedDisk {
		t.Errorf("phase CPU %+v, want 1200 major faults, starved, waiting for the disk", c)
	}
	for _, o := range ph.Ops {
		if o.Bound != BoundDisk {
			t.Errorf("op %s judged %q (%s) in a phase waiting for the disk", o.Op, o.Bound, o.Why)
		}
	}
}

// The cgroup quota comes from the receiver's metrics, its throttling counted from the
// first reading.
func TestQuota(t *testing.T) {
	acc := signals.NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, nil)
	a := New()
	for i, c := range []cgroup.CPU{
		{Cgroup: "/job", Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond, Periods: 100, Throttled: 40, ThrottledTime: time.Second},
		{Cgroup: "/job", Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond, Periods: 130, Throttled: 65, ThrottledTime: 3 * time.Second},
	} {
		acc.Step(server, decodeOf(1, uint64(i+1)*1000, node("ADD", "x", "", uint64(i+1)*1000+10, uint64(i+1)*1000+20, 1, 1)))
		acc.Quota(server.PID, c)
		a.Metrics(acc.Emit(signals.Telemetry{}))
	}
	q := a.Snapshot().Processes[0].Quota
	if want := (Quota{Cgroup: "/job", CPUs: 0.5, Periods: 30, Throttled: 25, ThrottledSeconds: 2, Threads: 0}); q == nil || *q != want {
		t.Fatalf("quota %+v, want %+v", q, want)
	}
}

// Read once, and again as the process exits, the quota's counts are all the cgroup's,
// and say so.
func TestQuotaReadOnce(t *testing.T) {
	acc := signals.NewMetrics(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type), roofline.Roofs{}, nil)
	acc.Step(server, decodeOf(1, 1000, node("ADD", "x", "", 1010, 1020, 1, 1)))
	acc.Quota(server.PID, cgroup.CPU{Cgroup: "/job", Quota: 100 * time.Millisecond, Period: 100 * time.Millisecond, Periods: 12, Throttled: 9, ThrottledTime: time.Second})
	a := New()
	a.Metrics(acc.Emit(signals.Telemetry{}))
	acc.Forget(server.PID)
	a.Metrics(acc.Emit(signals.Telemetry{}))
	if q := a.Snapshot().Processes[0].Quota; q == nil || q.Periods != 12 || q.Throttled != 9 || !q.SinceMade {
		t.Fatalf("quota %+v, want the cgroup's 9 of 12 periods, since it was made", q)
	}
}

// The timeline's graph brings its decode's device work: the device's splits and the
// copies queued to them, in µs from the graph's start, spans of other decodes left out.
func TestTimelineDeviceWork(t *testing.T) {
	d := decodeOf(1, 1000, node("GET_ROWS", "inp_embd", "", 1010, 1020, 1, 1))
	d.Copies = []assemble.Copy{{TID: 1, Src: "CPU", Dst: "Vulkan0", Tensor: "inp_embd", Bytes: 8192, Start: 1030, End: 1040, Queued: true},
		{TID: 1, Src: "Vulkan0", Dst: "CPU", Tensor: "result_output", Bytes: 4, Start: 9000, End: 9100}} // not queued: the CPU's
	d.Splits = []assemble.Split{{TID: 1, Backend: "CPU", NNodes: 1, Start: 1005, End: 1025},
		{TID: 1, Backend: "Vulkan0", NNodes: 95, Start: 1050, End: 1060, Device: true, Done: 8000, Wait: 6000, Bound: true}}
	d.End = 9200
	other := &assemble.Step{PID: 1, TID: 1, Tokens: 1, Start: 20000} // no traced graph
	other.Splits = []assemble.Split{{TID: 1, Backend: "Vulkan0", NNodes: 95, Start: 20030, End: 20040, Device: true, Done: 25000}}
	other.End = 25100
	td := traces(server, d)
	// the other decode's spans in the same batch, under the same resource
	traces(server, other).ResourceSpans().At(0).ScopeSpans().MoveAndAppendTo(td.ResourceSpans().At(0).ScopeSpans())
	a := New()
	a.Traces(td)
	tl := a.Snapshot().Processes[0].Timeline
	if tl == nil {
		t.Fatal("no timeline")
	}
	// the graph starts at 1001
	want := []Work{
		{Backend: "Vulkan0", Copy: true, Start: 0.029, Duration: 0.01, Bytes: 8192, Tensor: "inp_embd"},
		{Backend: "Vulkan0", Start: 0.049, Duration: 6.95, Wait: 6, Bound: true, Nodes: 95},
	}
	if fmt.Sprint(tl.Device) != fmt.Sprint(want) {
		t.Errorf("device work\n %+v, want\n %+v", tl.Device, want)
	}
}

// A whisper.cpp transcription: its steps share the job's trace, and each graph folds into
// its own step's phase, the encoder's and the decoder's passes apart; the job's figures
// sum into the process's transcriptions.
func TestFoldTranscription(t *testing.T) {
	p := &signals.Origin{PID: 9, VPID: 9, Exe: "/usr/bin/node", Runtime: "whisper.cpp",
		Whisper: &model.Whisper{Type: "tiny", AudioLayers: 4, TextLayers: 4, FileType: "F16"}}
	j := &assemble.Job{PID: 9, TID: 9, Samples: 48000, Start: 1000, End: 3e9}
	enc := decodeOf(0, 2000, node("MUL_MAT", "node_3", "f16", 2010, 2e8, 1e9, 1e6))
	enc.Kind, enc.Job, enc.Name, enc.Phase, enc.Stage = assemble.SchedCompute, j, "whisper.encode", "encode", "encoder"
	dec := decodeOf(0, 3e8, node("GET_ROWS", "node_0", "f16", 3e8+10, 3e8+1e6, 1e3, 1e6), node("MUL_MAT", "node_9", "f16", 3e8+1e6, 4e8, 1e6, 1e6))
	dec.Kind, dec.Job, dec.Name, dec.Phase, dec.Stage, dec.Tokens = assemble.SchedCompute, j, "whisper.decode", "decode", "decoder", 1
	j.Phases = map[string]assemble.JobPhase{"encode": {Steps: 1, NS: enc.End - enc.Start}, "decode": {Steps: 1, NS: dec.End - dec.Start}}
	s := signals.NewSpans(signals.Clock{Offset: 1e18}, true, peaks, nil)
	td := ptrace.NewTraces()
	s.Step(td, p, enc)
	s.Step(td, p, dec)
	s.Job(td, p, j)
	a := New()
	a.Traces(td)
	v := a.Snapshot()
	if len(v.Processes) != 1 {
		t.Fatalf("%d processes", len(v.Processes))
	}
	pr := v.Processes[0]
	if pr.Runtime != "whisper.cpp" || pr.Model != "whisper tiny (F16)" {
		t.Errorf("runtime %q, model %q", pr.Runtime, pr.Model)
	}
	if len(pr.Phases) != 2 || pr.Phases[0].Name != "encode" || pr.Phases[1].Name != "decode" {
		t.Fatalf("phases %+v", pr.Phases)
	}
	if e, d := pr.Phases[0], pr.Phases[1]; e.Decodes != 1 || e.TracedGraphs != 1 || len(e.Ops) != 1 || e.Ops[0].Op != "MUL_MAT" ||
		d.Decodes != 1 || d.Tokens != 1 || len(d.Ops) != 2 {
		t.Errorf("encode %+v, decode %+v", e, d)
	}
	jb := pr.Jobs
	if jb == nil || jb.Count != 1 || jb.AudioSeconds != 3 || jb.EncodePasses != 1 || jb.DecodePasses != 1 ||
		math.Abs(jb.RTF.P50-float64(j.End-j.Start)/1e9/3) > 0.03 {
		t.Errorf("transcriptions %+v", jb)
	}
}

// A device's layers are those whose matmuls it computes in small batches: not a layer
// whose last, weightless node it computes beside the output layer (the scheduler extends
// a backend's run over such nodes), nor one whose matmul a prefill of 32 tokens or more
// hands it from the CPU's weights (op offload). The resource names a software device.
func TestDeviceLayers(t *testing.T) {
	onDevice := func(tokens int, start uint64, nodes ...*assemble.NodeInfo) *assemble.Step {
		d := decodeOf(tokens, start, node("MUL_MAT", "ffn_up-0", "q4_0", start+10, start+20, 1, 1))
		d.Splits = []assemble.Split{{TID: 1, Backend: "Vulkan0", NNodes: len(nodes), Start: start + 30, End: start + 40, Device: true, Done: start + 50, Nodes: nodes}}
		d.End = start + 60
		return d
	}
	weighted := func(op, name string) *assemble.NodeInfo {
		return &assemble.NodeInfo{Op: op, Name: name, Type: "f32", Srcs: []assemble.Src{assemble.NewSrc("q4_0", [4]int64{256, 256, 1, 1})}}
	}
	td := traces(server,
		onDevice(1, 1000, &assemble.NodeInfo{Op: "ADD", Name: "l_out-1", Type: "f32"}, // layer 1's end
			&assemble.NodeInfo{Op: "RMS_NORM", Name: "norm", Type: "f32"}, weighted("MUL_MAT", "result_output"), weighted("MUL_MAT", "ffn_up-3")),
		onDevice(64, 2000, weighted("MUL_MAT", "ffn_up-0"), weighted("MUL_MAT", "ffn_up-2"))) // op offload
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(schema.ResourceGGMLDeviceSoftware, "lavapipe")
	a := New()
	a.Traces(td)
	p := a.Snapshot().Processes[0]
	var dev *Backend
	for i := range p.Backends {
		if p.Backends[i].Backend == "Vulkan0" {
			dev = &p.Backends[i]
		}
	}
	if dev == nil || fmt.Sprint(dev.Layers) != "[3]" || dev.Ops["MUL_MAT"] != 4 {
		t.Errorf("device %+v, want layers [3]", dev)
	}
	if p.Software != "lavapipe" {
		t.Errorf("software %q", p.Software)
	}
}

// llama_decode returns once a GPU's work is queued: a token's time runs until the CPU saw
// that work done, and the phase's time, its tokens per second and the decode latency say
// so.
func TestDecodeUntilDeviceDone(t *testing.T) {
	d := decodeOf(1, 1000, node("GET_ROWS", "inp_embd", "", 1010, 1020, 1, 1))
	d.Splits = []assemble.Split{{TID: 1, Backend: "Vulkan0", NNodes: 95, Start: 1050, End: 1060, Device: true, Done: 5000, Wait: 3000},
		{TID: 1, Backend: "Vulkan0", NNodes: 2, Start: 1070, End: 1080, Device: true, Done: 4000}} // seen done before the other
	d.End = 1100
	a := New()
	a.Traces(traces(server, d))
	var secs float64
	p := a.Snapshot().Processes[0]
	for _, ph := range p.Phases {
		if ph.Name == "decode" {
			secs = ph.DecodeSeconds
		}
	}
	if math.Abs(secs-4000e-9) > 1e-12 {
		t.Errorf("decode phase %.0f ns, want 4000: from the decode's start until its device work was seen done", secs*1e9)
	}
	if p.Latency.Count != 1 || math.Abs(p.Latency.Max-4000e-6) > 1e-9 || p.Latency.P50 != p.Latency.Max {
		t.Errorf("decode latency %+v, want one of 4000 ns", p.Latency)
	}
}

// A duration moved in the histogram leaves its old bucket: the count stays.
func TestLatencyMoved(t *testing.T) {
	h := newLogHistogram()
	for range 9 {
		h.add(1e-3)
	}
	h.add(2e-3)
	h.move(2e-3, 50e-3)
	q := h.quantiles()
	if q.Count != 10 || q.Max != 50 || q.P90 > 1.05 || q.P99 < 49 {
		t.Errorf("quantiles %+v: want 10, nine of 1 ms and one of 50 ms", q)
	}
}

// An op's fraction of the roofline is its nodes' time at their own roofs over their
// time: a small node judged against L1 and a large one against memory, each below its
// roof, never add up to more than the roof.
func TestOpFractionOfItsNodesRoofs(t *testing.T) {
	withCaches := roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9, Levels: []roofline.Level{{Name: "L1", Size: 64 << 10, Bandwidth: 200e9}}}
	g := &assemble.Graph{TID: 3, NThreads: 1, Start: 1000, End: 3_000_000, Traced: true, Nodes: []*assemble.Node{
		node("ADD", "small", "", 1000, 2000, 10e3, 40e3),       // 40 GB/s from L1: 0.2 of its roof
		node("ADD", "large", "", 2000, 1_002_000, 2.5e6, 10e6), // 10 GB/s from memory: 0.5
	}}
	out := ptrace.NewTraces()
	signals.NewSpans(signals.Clock{}, true, withCaches, nil).Graph(out, server, g)
	a := New()
	a.Traces(out)
	o := a.Snapshot().Processes[0].Phases[0].Ops[0]
	large, _ := withCaches.Memory(roofline.Work{Bytes: 10e6}, 0) // memory's, but for L1's share
	if want := (0.2*1e-6 + 10e9/large*1e-3) / (1e-6 + 1e-3); o.Op != "ADD" || o.Calls != 2 || math.Abs(o.PeakFrac-want) > 1e-9 {
		t.Errorf("op %+v, want fraction %g", o, want)
	}
}

// A process killed inside its first prefill by its memory cgroup's OOM killer is shown,
// with its end and what it computed: the cut prefill's graph and nodes, and no token.
func TestEnded(t *testing.T) {
	bench := &signals.Origin{PID: 9, VPID: 9, Exe: "/bin/llama-bench", Runtime: "llama.cpp"}
	d := decodeOf(64, 1000, node("MUL_MAT", "Qcur-0", "q4_0", 1010, 1310, 1e6, 1e6))
	d.Cut, d.Graphs[0].Cut = true, true
	td := traces(bench, d)
	s := signals.NewSpans(signals.Clock{Offset: 1e18}, true, peaks, nil)
	s.Exit(td, bench, &signals.End{Exit: watch.Exit{At: 1400, Status: 9, OOM: true}, Traced: 500, OOM: signals.OOMCgroup, Graphs: 1,
		Memory: cgroup.Limit{Cgroup: "/job", Limit: 600e6, Usage: 1e6, Peak: 600e6}})
	a := New()
	a.Traces(td)
	v := a.Snapshot()
	if len(v.Processes) != 1 {
		t.Fatalf("%d processes", len(v.Processes))
	}
	p := v.Processes[0]
	e := p.End
	want := "killed by SIGKILL: the OOM killer, for memory cgroup /job's limit (600.0 MB; usage 1.0 MB, peak 600.0 MB); " +
		"1 graph computed and 0 decodes completed while traced, and the one in progress cut short"
	if e == nil || e.Text != want || !e.Failed || e.OOM != "cgroup" || e.Limit != 600e6 || e.Peak != 600e6 || !e.Cut {
		t.Fatalf("end %+v\nwant text %q", e, want)
	}
	if len(p.Phases) != 1 || p.Phases[0].Decodes != 0 || p.Phases[0].Tokens != 0 || p.Phases[0].TracedGraphs != 1 ||
		len(p.Phases[0].Ops) != 1 || p.Latency.Count != 0 {
		t.Fatalf("phases %+v, latency %+v", p.Phases, p.Latency)
	}
}

// The first graph is set against the later graphs of its phase.
func TestColdStart(t *testing.T) {
	var c coldState
	c.add(prefill, 5000, 2.0) // the warm-up prompt faults the weights in
	if v := c.view(); v != nil {
		t.Errorf("a first graph alone: %+v", v)
	}
	c.add(decode, 2, 0.05)
	c.add(prefill, 0, 0.2)
	c.add(prefill, 0, 0.4)
	v := c.view()
	if v == nil || v.Phase != prefill || v.Seconds != 2 || v.Faults != 5000 || math.Abs(v.Warm-0.3) > 1e-9 || v.WarmGraphs != 3 || v.WarmFaults != 2 {
		t.Fatalf("cold %+v", v)
	}
}

// A graph after an idle spell that read from the disk is set against the warm graphs of
// its phase, and is not one of them; the slowest is kept.
func TestResumed(t *testing.T) {
	var c coldState
	c.add(prefill, 0, 0.5)
	c.resume(prefill, 60, 0.6, 4)
	if v := c.resumedView(); v != nil {
		t.Errorf("no warm prefill graph yet: %+v", v)
	}
	c.add(prefill, 0, 0.14)
	c.add(prefill, 0, 0.16)
	c.resume(prefill, 900, 1.5, 30)
	c.resume(decode, 3, 0.1, 2)
	v := c.resumedView()
	if v == nil || v.Phase != prefill || v.Seconds != 1.5 || v.Faults != 900 || v.Idle != 30 || math.Abs(v.Warm-0.15) > 1e-9 || v.Graphs != 3 || v.AllFaults != 963 {
		t.Fatalf("resumed %+v", v)
	}
}

// Requests whose arrival was seen fold their waits: those that waited for their slot
// from QueuedWait count as queued, with their waits and times to first token; one
// without an arrival has no wait.
func TestQueuedRequests(t *testing.T) {
	s := signals.NewSpans(signals.Clock{Offset: 1e18}, true, peaks, nil)
	td := ptrace.NewTraces()
	for _, wait := range []uint64{2e6, 6e8, 12e8} {
		s.Request(td, server, &requests.Request{PID: 7, Arrived: 1e9, Start: 1e9 + wait, FirstToken: 1e9 + wait + 2e8, End: 3e9 + wait,
			Prompt: 20, Output: 10, Decodes: 10, Ended: requests.Rewound, Queued: wait > 2e6})
	}
	// Waited as long, for the decode in progress, its slot free: not queued.
	s.Request(td, server, &requests.Request{PID: 7, Arrived: 1e9, Start: 16e8, FirstToken: 18e8, End: 3e9, Prompt: 20, Output: 10, Decodes: 10, Ended: requests.Rewound})
	s.Request(td, server, &requests.Request{PID: 7, Start: 1e9, FirstToken: 12e8, End: 3e9, Prompt: 20, Output: 10, Decodes: 10, Ended: requests.Rewound})
	a := New()
	a.Traces(td)
	r := a.Snapshot().Processes[0].Requests
	if r == nil || r.Count != 5 || r.Wait == nil || r.Wait.Count != 4 || r.Queued != 2 ||
		math.Abs(r.QueuedWait-1.8) > 1e-9 || math.Abs(r.QueuedTTFT-0.4) > 1e-9 {
		t.Fatalf("requests %+v (wait %+v), want 4 waits, 2 queued 1.8 s with 0.4 s to their first tokens", r, r.Wait)
	}
}

// The deepest traced decode graph stands for the attention at depth: its attention
// nodes' time (the matmuls over the KV cache, SOFT_MAX) over its own, not the phase's
// blend of a token at depth 1 and one at 2048. Every graph's depth counts in MaxCells,
// traced or not.
// The line through one-token decodes' time against their depth: 5 ms a token more for
// each 1000 cells over 20 to 2000; nil over too narrow a range or too few graphs.
func TestDepthFit(t *testing.T) {
	var d depthSums
	for i := range 40 {
		cells := int64(20 + 50*i)
		d.add(cells, 0.02+5e-6*float64(cells)+1e-4*float64(i%2))
	}
	f := d.view()
	if f == nil || f.Graphs != 40 || f.From != 20 || f.To != 1970 || math.Abs(f.MSPer1k-5) > 0.05 || math.Abs(f.BaseMS-20.05) > 0.1 {
		t.Errorf("fit %+v, want 5 ms per 1000 cells from 20 ms", f)
	}
	var narrow, few depthSums
	for i := range 40 {
		narrow.add(int64(1000+i), 0.03)
	}
	for i := range 10 {
		few.add(int64(100*i), 0.03)
	}
	if narrow.view() != nil || few.view() != nil {
		t.Errorf("fits over 40 cells or 10 graphs: %+v, %+v", narrow.view(), few.view())
	}
}

func TestDeepestDecode(t *testing.T) {
	a := New()
	shallow := decodeOf(1, 1e6, node("MUL_MAT", "Qcur-0", "q4_0", 1e6+10, 1e6+9e5, 1e6, 1e6),
		node("MUL_MAT", "kq-0", "", 1e6+9e5, 1e6+9.1e5, 1e3, 1e3))
	shallow.Graphs[0].Cells = 1
	deep := decodeOf(1, 3e6, node("MUL_MAT", "Qcur-0", "q4_0", 3e6+10, 3e6+9e5, 1e6, 1e6),
		node("MUL_MAT", "kq-0", "", 3e6+9e5, 3e6+1.2e6, 1e6, 1e6), node("SOFT_MAX", "kq_soft_max-0", "", 3e6+1.2e6, 3e6+1.3e6, 1e3, 1e3))
	deep.Graphs[0].Cells = 2048
	deeper := decodeOf(1, 5e6, node("ADD", "x-0", "", 5e6+10, 5e6+100, 1, 1))
	deeper.Graphs[0].Cells, deeper.Graphs[0].Traced, deeper.Graphs[0].Nodes = 2060, false, nil
	a.Traces(traces(server, shallow, deep, deeper))
	dec := a.Snapshot().Processes[0].Phases[0]
	d := dec.Deepest
	if dec.Name != "decode" || d == nil || d.Cells != 2048 || dec.MaxCells != 2060 || dec.KVCells != 2048 {
		t.Fatalf("decode %s: deepest %+v, max cells %d, traced cells %d", dec.Name, d, dec.MaxCells, dec.KVCells)
	}
	// kq and the soft max: 0.3 + 0.1 ms of the graph's 1.3 ms.
	if math.Abs(d.Attention-0.4e-3) > 1e-8 || math.Abs(d.Seconds-1.3e-3) > 1e-8 {
		t.Errorf("deepest's attention %.6f s of %.6f, want 0.0004 of 0.0013", d.Attention, d.Seconds)
	}
}
