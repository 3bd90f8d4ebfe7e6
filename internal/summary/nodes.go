package summary

import (
	"cmp"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
)

// nodeAttrs is what the summary reads of a node span, gathered in one pass over its
// attributes: at full tracing the view folds some 14 000 spans a second, on the cores
// the model uses.
type nodeAttrs struct {
	op, weight, bound, tensor, level, roof      string
	flops, bytes, fraction, flopsRate, byteRate float64
	threads, layer, offCPU, runq, barrier       int64
	preemptions, migrations                     int64
	hasLayer, critical, hasExperts, hasBusy     bool
	experts, busy                               pcommon.Slice // valid when hasExperts, hasBusy
	perf                                        []perfValue
}

type perfValue struct {
	name string
	v    int64
}

func (n *nodeAttrs) read(attrs pcommon.Map) {
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case schema.GGMLOp:
			n.op = v.Str()
		case schema.GGMLWeightType:
			n.weight = v.Str()
		case schema.GGMLRooflineBound:
			n.bound = v.Str()
		case schema.GGMLRooflineLevel:
			n.level = v.Str()
		case schema.GGMLRooflineRoof:
			n.roof = v.Str()
		case schema.GGMLTensorName:
			n.tensor = v.Str()
		case schema.GGMLFlops:
			n.flops = schema.Number(v)
		case schema.GGMLBytes:
			n.bytes = schema.Number(v)
		case schema.GGMLRooflinePeakFraction:
			n.fraction = schema.Number(v)
		case schema.GGMLRooflineFlopsPerSecond:
			n.flopsRate = schema.Number(v)
		case schema.GGMLRooflineBytesPerSecond:
			n.byteRate = schema.Number(v)
		case schema.GGMLThreads:
			n.threads = schema.Integer(v)
		case schema.GGMLLayer:
			n.layer, n.hasLayer = schema.Integer(v), true
		case schema.GGMLSchedOffCPUNS:
			n.offCPU = schema.Integer(v)
		case schema.GGMLSchedRunqueueNS:
			n.runq = schema.Integer(v)
		case schema.GGMLBarrierWaitNS:
			n.barrier = schema.Integer(v)
		case schema.GGMLSchedPreemptions:
			n.preemptions = schema.Integer(v)
		case schema.GGMLSchedMigrations:
			n.migrations = schema.Integer(v)
		case schema.GGMLCriticalPath:
			n.critical = v.Type() == pcommon.ValueTypeBool && v.Bool()
		case schema.GGMLMoEExperts:
			if v.Type() == pcommon.ValueTypeSlice {
				n.experts, n.hasExperts = v.Slice(), true
			}
		case schema.GGMLThreadBusyNS:
			if v.Type() == pcommon.ValueTypeSlice {
				n.busy, n.hasBusy = v.Slice(), true
			}
		default:
			if c, ok := strings.CutPrefix(k, schema.PerfPrefix); ok && v.Type() == pcommon.ValueTypeInt && len(n.perf) < 16 {
				n.perf = append(n.perf, perfValue{c, v.Int()})
			}
		}
		return true
	})
}

// KVPrefix marks an op row of the attention's matmuls over the KV cache (llama.cpp's kq
// and kqv, with flash attention off), whose "weights" are the cache: "KV f16".
const KVPrefix = "KV "

// attends says whether tensor names one of the attention's matmuls over the KV cache.
func attends(tensor string) bool {
	stem, _, _ := strings.Cut(tensor, "-")
	return stem == "kq" || stem == "kqv"
}

func (a *Aggregator) node(p *proc, s ptrace.Span, g *graphRef) {
	var n nodeAttrs
	n.read(s.Attributes())
	if n.op == "" {
		return // not a node span: a span some other receiver put in the pipeline
	}
	var ph *phase
	if g != nil {
		ph = g.phase
	} else {
		name, _ := a.phases.get(s.TraceID())
		ph = p.phase(name)
	}
	k := opKey{n.op, cmp.Or(n.weight, "none")}
	if n.op == "MUL_MAT" && attends(n.tensor) {
		k.weight = KVPrefix + k.weight // not weights: the KV cache, read by the attention
	}
	o := ph.ops[k]
	if o == nil {
		if len(ph.ops) >= maxOps {
			k = opKey{"other", "none"}
			o = ph.ops[k]
		}
		if o == nil {
			o = &Op{Op: k.op, Weight: k.weight}
			ph.ops[k] = o
		}
	}
	d := schema.Seconds(s)
	o.Calls++
	o.flops += n.flops
	o.byt += n.bytes
	t := timed{op: o, phase: ph, layer: -1, start: s.StartTimestamp(), end: s.EndTimestamp()}
	if n.bound != "" { // classified: the receiver had roofs
		o.attained.Add(n.fraction, d)
		switch roofKind(n.roof, n.bound) {
		case BoundMemory:
			o.memorySecs += d
		case BoundCompute:
			o.computeSecs += d
		}
		p.derive(&n)
	}
	sc := SchedSums{
		OffCPU:      float64(n.offCPU) / 1e9,
		RunQueue:    float64(n.runq) / 1e9,
		BarrierWait: float64(n.barrier) / 1e9,
		ThreadTime:  d * float64(max(n.threads, 1)),
		Preemptions: n.preemptions,
		Migrations:  n.migrations,
	}
	o.Sched.add(sc)
	ph.Sched.add(sc)
	for _, c := range n.perf {
		if o.Counters == nil {
			o.Counters = map[string]int64{}
		}
		if _, ok := o.Counters[c.name]; ok || len(o.Counters) < 16 {
			o.Counters[c.name] += c.v
			p.counters[c.name] = true
		}
	}
	if n.hasLayer && (ph.layers[int(n.layer)] > 0 || len(ph.layers) < maxLayers) {
		t.layer = int(n.layer)
	}
	if g == nil {
		t.add(t.end)
	} else {
		g.timed = append(g.timed, t)
	}
	if n.hasExperts {
		p.route(int(n.layer), n.experts)
	}
	if g != nil && g.timeline != nil && len(g.timeline.Nodes) < maxNodes {
		tn := Node{Op: n.op, Tensor: n.tensor, Start: float64(int64(s.StartTimestamp())-int64(g.start)) / 1e3,
			Duration: d * 1e6, Critical: n.critical}
		for i := 0; n.hasBusy && i < n.busy.Len() && i < 256; i++ {
			tn.Busy = append(tn.Busy, float64(n.busy.At(i).Int())/1e3)
		}
		g.timeline.Nodes = append(g.timeline.Nodes, tn)
	}
}

// route counts a MoE node's expert selections into its layer.
func (p *proc) route(layer int, experts pcommon.Slice) {
	counts := p.moeSpans[layer]
	for i := 0; i < experts.Len(); i++ {
		e := int(experts.At(i).Int())
		if e < 0 || e >= maxExperts {
			continue
		}
		if e >= len(counts) {
			counts = append(counts, make([]int64, e+1-len(counts))...)
		}
		counts[e]++
	}
	if _, ok := p.moeSpans[layer]; ok || len(p.moeSpans) < maxLayers {
		p.moeSpans[layer] = counts
	}
}

func (s *SchedSums) add(o SchedSums) {
	s.OffCPU += o.OffCPU
	s.RunQueue += o.RunQueue
	s.BarrierWait += o.BarrierWait
	s.ThreadTime += o.ThreadTime
	s.Preemptions += o.Preemptions
	s.Migrations += o.Migrations
}

// derive recovers a roof from a classified node (its achieved rate over the fraction of
// the roof it reached), for input that lacks profinfer.roofline.peak: the roof its node
// names (ggml.roofline.roof), memory's from a node whose bytes came from memory (older
// collectors name neither roof nor level, and have FMA and memory roofs alone).
func (p *proc) derive(n *nodeAttrs) {
	if n.fraction <= 0 {
		return
	}
	switch roof(n.roof, n.bound) {
	case roofline.RoofBandwidth:
		if n.level == "" || n.level == "DRAM" {
			p.derived.Bandwidth = n.byteRate / n.fraction
		}
	case roofline.RoofInt8:
		p.derived.Int8 = n.flopsRate / n.fraction
	case roofline.RoofBF16:
		p.derived.BF16 = n.flopsRate / n.fraction
	case roofline.RoofFLOPS:
		p.derived.FLOPS = n.flopsRate / n.fraction
	}
}

// roof is the roof a node's peak fraction is of: the one it names, else (an older
// collector's) its bound's, memory's the bandwidth and compute's the FMA roof; "" where
// an older collector's bound names neither (overhead, starved).
func roof(named, bound string) string {
	switch {
	case named != "":
		return named
	case bound == BoundMemory:
		return roofline.RoofBandwidth
	case bound == BoundCompute:
		return roofline.RoofFLOPS
	}
	return ""
}

// roofKind is BoundMemory for a node judged against a bandwidth roof, BoundCompute for
// one against a compute roof, "" where unknown.
func roofKind(named, bound string) string {
	switch roof(named, bound) {
	case "":
		return ""
	case roofline.RoofBandwidth:
		return BoundMemory
	}
	return BoundCompute
}
