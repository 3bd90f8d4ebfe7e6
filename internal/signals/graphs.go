package signals

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/dag"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
)

// Graph appends a graph computed outside llama_decode, as the root of its own trace.
func (s *Spans) Graph(td ptrace.Traces, p *Origin, g *assemble.Graph) {
	s.graph(s.scope(td, p), s.traceID(), pcommon.NewSpanIDEmpty(), g)
}

func (s *Spans) graph(spans ptrace.SpanSlice, trace pcommon.TraceID, parent pcommon.SpanID, g *assemble.Graph) ptrace.Span {
	sp := spans.AppendEmpty()
	s.begin(sp, trace, parent, schema.SpanGraph, g.Start, g.End)
	a := sp.Attributes()
	a.EnsureCapacity(graphAttrs)
	a.PutInt(schema.GGMLGraphNodes, int64(g.NNodes))
	a.PutBool(schema.GGMLGraphTraced, g.Traced)
	if g.Traced {
		a.PutInt(schema.GGMLGraphNodesComputed, int64(len(g.Nodes)))
	}
	a.PutStr(schema.GGMLBackend, "CPU")
	a.PutInt(schema.GGMLThreads, int64(g.NThreads))
	a.PutInt(schema.ThreadID, int64(g.TID))
	if g.Cells > 0 {
		a.PutInt(schema.GGMLGraphKVCells, int64(g.Cells))
	}
	putCut(a, g.Cut)
	if g.First {
		a.PutBool(schema.GGMLGraphFirst, true)
	}
	if g.CPU.Known {
		a.PutInt(schema.GGMLGraphOnCPUNS, int64(g.CPU.Run))
		a.PutInt(schema.GGMLGraphRunqueueNS, int64(g.CPU.Wait))
		a.PutInt(schema.GGMLGraphMajorFaults, int64(g.CPU.MajFlt))
		a.PutDouble(schema.GGMLGraphOnCPUShare, min(float64(g.CPU.Run)/float64(max(g.End-g.Start, 1))/float64(g.NThreads), 1))
		if g.CPU.Perturbed {
			a.PutBool(schema.GGMLGraphOnCPUPerturbed, true)
		}
	}
	if !s.Nodes || len(g.Nodes) == 0 {
		return sp
	}
	d := dag.Of(g.Nodes)
	a.PutInt(schema.GGMLCriticalPathDurationNS, int64(d.Duration))
	a.PutDouble(schema.GGMLCriticalPathShare, float64(d.Duration)/float64(max(g.End-g.Start, 1)))
	a.PutInt(schema.GGMLCriticalPathNodes, int64(len(d.Critical)))
	ids := make([]pcommon.SpanID, len(g.Nodes))
	critical := d.Critical
	spans.EnsureCapacity(spans.Len() + len(g.Nodes))
	kept := KeptBytes(g)
	for i, n := range g.Nodes {
		ns := spans.AppendEmpty()
		s.node(ns, trace, sp.SpanID(), n, g, kept)
		ids[i] = ns.SpanID()
		// Each node links to the nodes it read the results of: the graph's edges.
		ns.Links().EnsureCapacity(len(d.Producers[i]))
		for _, p := range d.Producers[i] {
			l := ns.Links().AppendEmpty()
			l.SetTraceID(trace)
			l.SetSpanID(ids[p])
		}
		if len(critical) > 0 && critical[0] == i {
			ns.Attributes().PutBool(schema.GGMLCriticalPath, true)
			critical = critical[1:]
		}
	}
	return sp
}

// nodeAttrs is about how many attributes a node span gets with the roofline on, so that
// the map is allocated once: at full tracing the collector builds thousands a second.
const nodeAttrs = 22

func (s *Spans) node(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, n *assemble.Node, g *assemble.Graph, kept float64) {
	threads := g.NThreads
	s.begin(sp, trace, parent, schema.SpanNode, n.Start, n.End) // renamed by op below
	a := sp.Attributes()
	a.EnsureCapacity(nodeAttrs)
	a.PutInt(schema.GGMLThreads, int64(threads))
	if len(n.Threads) == threads { // every thread's share was seen: the barrier probe is on
		busy := a.PutEmptySlice(schema.GGMLThreadBusyNS)
		busy.EnsureCapacity(threads)
		for ith := 0; ith < threads; ith++ {
			var d uint64
			for _, t := range n.Threads {
				if t.Ith == ith {
					d = t.Busy - t.Start
				}
			}
			busy.AppendEmpty().SetInt(int64(d))
		}
		a.PutInt(schema.GGMLBarrierWaitNS, int64(BarrierWait(n)))
	}
	putSched(a, n.Sched)
	s.Counters.put(a, n)
	info := n.Info
	if info == nil {
		return
	}
	sp.SetName(info.Op)
	putNodeInfo(a, info)
	if r := n.Routing; r != nil {
		a.PutInt(schema.GGMLMoEExpertsUsed, int64(r.Used))
		a.PutInt(schema.GGMLMoETokens, int64(r.Tokens))
		ex := a.PutEmptySlice(schema.GGMLMoEExperts)
		ex.EnsureCapacity(len(r.Experts))
		for _, e := range r.Experts {
			ex.AppendEmpty().SetInt(int64(e))
		}
	}
	w, known := info.Work.Attending(g.Cells)
	if info.FLOPs == 0 || !known {
		return
	}
	a.PutDouble(schema.GGMLFlops, w.FLOPs)
	a.PutDouble(schema.GGMLBytes, w.Bytes)
	if !s.Peaks.Known() {
		return
	}
	c := classify(w, n, g, kept, s.Peaks)
	a.PutStr(schema.GGMLRooflineBound, string(c.Bound))
	a.PutDouble(schema.GGMLRooflinePeakFraction, c.Fraction)
	a.PutStr(schema.GGMLRooflineRoof, c.Roof)
	if c.Level != "" {
		a.PutStr(schema.GGMLRooflineLevel, c.Level)
	}
	a.PutDouble(schema.GGMLRooflineFlopsPerSecond, c.FLOPS)
	a.PutDouble(schema.GGMLRooflineBytesPerSecond, c.Bandwidth)
}

// putNodeInfo puts what a node's description says: its op, tensor, layer and sources.
func putNodeInfo(a pcommon.Map, info *assemble.NodeInfo) {
	a.PutStr(schema.GGMLOp, info.Op)
	a.PutStr(schema.GGMLTensorName, info.Name)
	a.PutStr(schema.GGMLTensorType, info.Type)
	if w := WeightType(info); w != "" {
		a.PutStr(schema.GGMLWeightType, w)
	}
	shape := a.PutEmptySlice(schema.GGMLTensorShape)
	shape.EnsureCapacity(len(info.Shape))
	for _, d := range info.Shape {
		shape.AppendEmpty().SetInt(d)
	}
	if l := Layer(info.Name); l >= 0 {
		a.PutInt(schema.GGMLLayer, int64(l))
	}
	if len(info.Srcs) > 0 {
		srcs := a.PutEmptySlice(schema.GGMLSrc)
		srcs.EnsureCapacity(len(info.Srcs))
		for _, src := range info.Srcs {
			srcs.AppendEmpty().SetStr(src.Text)
		}
	}
	if info.FusedOp != "" {
		a.PutStr(schema.GGMLFusedOp, info.FusedOp)
	}
}

// classify places a node of g that did w, in a graph that reads kept bytes of tensors
// kept across graphs (KeptBytes), under the roofline of peaks, unless g's process's
// threads lacked a CPU over its latest graphs (GraphCPU.Starved): then its wall time is
// no measure of the kernel, and it is starved. Its achieved rates stay what they were.
func classify(w roofline.Work, n *assemble.Node, g *assemble.Graph, kept float64, peaks roofline.Peaks) roofline.Class {
	c := roofline.Classify(w, kept, float64(n.End-n.Start)/1e9, peaks)
	if g.CPU.Starved {
		c.Bound = roofline.Starved
	}
	return c
}

// KeptBytes is what g's nodes read of tensors kept across graphs (weights, the KV
// cache): whether it fits in a cache decides where each node's share of it comes from.
func KeptBytes(g *assemble.Graph) float64 {
	var kept float64
	for _, n := range g.Nodes {
		if n.Info != nil {
			kept += n.Info.Kept
		}
	}
	return kept
}

// WeightType is the type of the matrix a node reads its rows from: the weights'
// quantisation for a layer's matmuls, which decides their speed far more than the f32
// they write. Empty for ops that read no such matrix.
func WeightType(info *assemble.NodeInfo) string {
	switch info.Op {
	case "MUL_MAT", "MUL_MAT_ID", "OUT_PROD", "GET_ROWS":
		if len(info.Srcs) > 0 {
			return info.Srcs[0].Type
		}
	}
	return ""
}

// BarrierWait is the time a node's threads spent in its closing barrier waiting for the
// slowest one, summed over threads.
func BarrierWait(n *assemble.Node) uint64 {
	var w uint64
	for _, t := range n.Threads {
		w += t.End - t.Busy
	}
	return w
}

// putSched records what the scheduler did to a node's threads; absent means none of it.
func putSched(a pcommon.Map, s events.CPUSched) {
	for _, kv := range [...]struct {
		key string
		v   uint64
	}{
		{schema.GGMLSchedOffCPUNS, s.OffCPU},
		{schema.GGMLSchedRunqueueNS, s.RunQueue},
		{schema.GGMLSchedPreemptions, uint64(s.Preemptions)},
		{schema.GGMLSchedMigrations, uint64(s.Migrations)},
	} {
		if kv.v != 0 {
			a.PutInt(kv.key, int64(kv.v))
		}
	}
}

// Layer returns the layer number in a tensor name such as "Qcur-12", "ffn_out-3" or
// "cache_k_l4 (view)", or -1.
func Layer(name string) int {
	name, _, _ = strings.Cut(name, " ")
	for _, sep := range []string{"-", "_l"} {
		i := strings.LastIndex(name, sep)
		if i < 0 {
			continue
		}
		if n, err := strconv.Atoi(name[i+len(sep):]); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}
