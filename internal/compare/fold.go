package compare

import (
	"cmp"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
)

// record is a step taken: a llama_decode, or a step of a runtime without one. Its
// children (splits, graphs, device work, copies) find it by their parents, or by their
// trace where the parent came in another batch.
type record struct {
	ph     *phaseFold
	n      int64 // its number among its phase's steps
	g      int64 // its number among its phase's traced steps; -1 until a traced graph of it came
	tokens int64
	end    int64   // unix ns: its span's end, or its device work's where that ended later
	secs   float64 // its span's time
	// cold says that it computed a new context's first graph (ggml.graph.first): it is
	// taken out of its block, with all its work.
	cold bool
}

func (r *record) block() *block { return r.ph.steps.at(r.n) }

// ggmlLayer are the spans of the GGML layer besides nodes.
var ggmlLayer = map[string]bool{schema.SpanSplit: true, schema.SpanDevice: true, schema.SpanCopy: true, schema.SpanGraph: true}

// stepNames are the steps of runtimes without llama_decode; each carries ggml.phase.
var stepNames = map[string]bool{schema.SpanWhisperEncode: true, schema.SpanWhisperDecode: true,
	schema.SpanOllamaForward: true, schema.SpanSchedCompute: true}

// stepOf returns the phase and tokens of a step span.
func stepOf(sp ptrace.Span) (phase string, tokens int64, ok bool) {
	attrs := sp.Attributes()
	switch {
	case sp.Name() == schema.SpanDecode:
		phase = schema.Str(attrs, schema.LlamaPhase)
		if phase != "prefill" && phase != "mixed" {
			phase = "decode"
		}
		return phase, schema.Int(attrs, schema.LlamaBatchTokens), true
	case stepNames[sp.Name()]:
		v, has := attrs.Get(schema.GGMLPhase)
		if !has {
			return "", 0, false // an older collector's scheduler span, not a step
		}
		return cmp.Or(v.AsString(), "compute"), schema.Int(attrs, schema.GGMLStepTokens), true
	}
	return "", 0, false
}

// fold takes a selected process's spans: its steps in the time range first, then their
// splits, graphs, device work and copies, then the traced graphs' nodes.
func (s *Side) fold(rs ptrace.ResourceSpans, p process) {
	if s.origin == 0 {
		s.setOrigin(rs)
	}
	schema.EachSpan(rs, func(sp ptrace.Span) {
		phase, tokens, ok := stepOf(sp)
		if !ok {
			return
		}
		start := int64(sp.StartTimestamp())
		s.extent = [2]int64{min(s.extent[0], start), max(s.extent[1], start)}
		if !s.inRange(start) {
			return
		}
		if _, ok := s.took[p.pid]; ok || len(s.took) < maxProcesses {
			s.took[p.pid] = p
		}
		s.first, s.last = min(s.first, start), max(s.last, int64(sp.EndTimestamp()))
		ph := s.phase(phase)
		if sp.Name() == schema.SpanDecode {
			ph.noteSettings(sp.Attributes())
		}
		r := &record{ph: ph, n: ph.steps.next(), g: -1, tokens: tokens, end: int64(sp.EndTimestamp()), secs: schema.Seconds(sp)}
		b := r.block()
		b.tokens += tokens
		b.steps++
		b.seconds += r.secs
		s.spans.put(sp.SpanID(), r)
		s.traces.put(sp.TraceID(), r)
	})
	schema.EachSpan(rs, func(sp ptrace.Span) {
		if sp.Name() == schema.SpanSplit {
			if r := s.recordOf(sp); r != nil {
				s.spans.put(sp.SpanID(), r)
			}
		}
	})
	// A new context's first graph is cold: its step is no measure of the steady ones
	// (llama-bench leaves its warm-up out too); it is a cold start's, which the findings
	// judge. Its step leaves its block before any of its work is added.
	schema.EachSpan(rs, func(sp ptrace.Span) {
		if sp.Name() == schema.SpanGraph && schema.Bool(sp.Attributes(), schema.GGMLGraphFirst) {
			if r := s.recordOf(sp); r != nil && !r.cold {
				r.cold = true
				b := r.block()
				b.tokens -= r.tokens
				b.steps--
				b.seconds -= r.secs
				r.ph.cold++
			}
		}
	})
	clear(s.graphs)
	schema.EachSpan(rs, func(sp ptrace.Span) {
		switch sp.Name() {
		case schema.SpanGraph:
			s.graph(sp)
		case schema.SpanDevice:
			s.device(sp)
		case schema.SpanCopy:
			s.copySpan(sp)
		}
	})
	schema.EachSpan(rs, func(sp ptrace.Span) {
		if g, ok := s.graphs[sp.ParentSpanID()]; ok {
			if g != nil {
				s.node(g, sp)
			}
		} else if !sp.ParentSpanID().IsEmpty() && !ggmlLayer[sp.Name()] && !stepNames[sp.Name()] {
			s.strays++ // a node whose graph came in another batch, or a foreign child
		}
	})
	for _, g := range s.graphs {
		if g != nil {
			g.addTimes()
		}
	}
}

// setOrigin takes the earliest span of the side's first batch as the origin its offsets
// count from, and resolves its time range.
func (s *Side) setOrigin(rs ptrace.ResourceSpans) {
	schema.EachSpan(rs, func(sp ptrace.Span) {
		if t := int64(sp.StartTimestamp()); t > 0 && (s.origin == 0 || t < s.origin) {
			s.origin = t
		}
	})
	if s.origin == 0 {
		return
	}
	if !s.Sel.From.IsZero() {
		s.from = s.Sel.From.resolve(s.origin)
	}
	if !s.Sel.To.IsZero() {
		s.to = s.Sel.To.resolve(s.origin)
	}
}

// recordOf returns the step a span is in: its parent's, else its trace's latest.
func (s *Side) recordOf(sp ptrace.Span) *record {
	if r := s.spans.get(sp.ParentSpanID()); r != nil {
		return r
	}
	if sp.ParentSpanID().IsEmpty() {
		return nil // a graph computed outside any step
	}
	return s.traces.get(sp.TraceID())
}

// Undescribed is the op of the nodes whose description was not read (spans named
// ggml.node): their time is kept, as a row of its own.
const Undescribed = "(undescribed)"

// graphCtx is a traced graph of the batch, and its nodes in the order they came; nil
// for a graph not taken.
type graphCtx struct {
	r       *record
	backend string
	end     int64
	nodes   []timedNode
}

type timedNode struct {
	id         int32
	start, end int64
}

// addTimes counts each node's time until the next one's start, as the summary does: a
// node's span runs until its last thread leaves it, which overlaps the next node when a
// thread was preempted at the barrier, and time counted so adds up to the graph's.
func (g *graphCtx) addTimes() {
	b := g.r.ph.graphs.at(g.r.g)
	for i, n := range g.nodes {
		until := g.end
		if i+1 < len(g.nodes) {
			until = g.nodes[i+1].start
		}
		end := min(n.end, max(until, n.start))
		b.add(n.id, float64(end-n.start)/1e9)
	}
}

func (s *Side) graph(sp ptrace.Span) {
	r := s.recordOf(sp)
	if r == nil || r.cold {
		s.graphs[sp.SpanID()] = nil // outside the selection, or outside any step: its nodes too
		return
	}
	attrs := sp.Attributes()
	if t := schema.Int(attrs, schema.GGMLThreads); t > 0 && !slices.Contains(s.threads, t) && len(s.threads) < maxThreads {
		s.threads = append(s.threads, t)
	}
	backend := cmp.Or(schema.Str(attrs, schema.GGMLBackend), "CPU")
	r.block().add(r.ph.table.id(idKey{kind: kindGraph, backend: backend, layer: -1}), schema.Seconds(sp))
	if !schema.Bool(attrs, schema.GGMLGraphTraced) {
		return
	}
	if r.g < 0 {
		r.g = r.ph.graphs.next()
		b := r.ph.graphs.at(r.g)
		b.tokens += r.tokens
		b.steps++
	}
	r.ph.graphs.at(r.g).seconds += schema.Seconds(sp)
	s.graphs[sp.SpanID()] = &graphCtx{r: r, backend: backend, end: int64(sp.EndTimestamp())}
}

func (s *Side) node(g *graphCtx, sp ptrace.Span) {
	var n nodeDesc
	n.read(sp.Attributes())
	if n.op == "" {
		if sp.Name() != schema.SpanNode {
			return // not a node: a span some other receiver put under the graph
		}
		n.op = Undescribed // its description was not read: its time is kept, by itself
	}
	id := s.ident(g.r.ph, g.backend, &n, false)
	g.nodes = append(g.nodes, timedNode{id, int64(sp.StartTimestamp()), int64(sp.EndTimestamp())})
}

// device counts a device's split: its time, divided among its nodes in proportion to
// the device's own time for each where its backend timed them (ggml-vulkan's perf
// logger), else as the device's work whole. Its nodes are aligned either way, so that a
// layer moved to the device reads as moved. A step lasts until its device's work is
// done: llama_decode returns once the work is queued, and the wait for it is in the call
// that next reads the results.
func (s *Side) device(sp ptrace.Span) {
	r := s.recordOf(sp)
	if r == nil || r.cold {
		return
	}
	backend := cmp.Or(schema.Str(sp.Attributes(), schema.GGMLBackend), "unknown")
	d, b := schema.Seconds(sp), r.block()
	if end := int64(sp.EndTimestamp()); end > r.end {
		b.seconds += float64(end-r.end) / 1e9
		r.end = end
		s.last = max(s.last, end)
	}
	evs := sp.Events()
	var timed int64
	descs := make([]nodeDesc, evs.Len())
	for i := range evs.Len() {
		descs[i].read(evs.At(i).Attributes())
		descs[i].op = cmp.Or(descs[i].op, evs.At(i).Name())
		timed += max(descs[i].ns, 0)
	}
	for i := range descs {
		id := s.ident(r.ph, backend, &descs[i], true)
		if timed > 0 && descs[i].ns > 0 {
			b.add(id, d*float64(descs[i].ns)/float64(timed))
		}
	}
	if timed == 0 {
		b.add(r.ph.table.id(idKey{kind: kindDevice, backend: backend, layer: -1}), d)
	}
}

func (s *Side) copySpan(sp ptrace.Span) {
	r := s.recordOf(sp)
	if r == nil || r.cold {
		return
	}
	attrs := sp.Attributes()
	route := cmp.Or(schema.Str(attrs, schema.GGMLBackendSource), "unknown") + "→" + cmp.Or(schema.Str(attrs, schema.GGMLBackendDestination), "unknown")
	r.block().add(r.ph.table.id(idKey{kind: kindCopy, backend: route, layer: -1}), schema.Seconds(sp))
}

// ident returns a node's identity in its phase, noting what the setup reads of it;
// onDevice for a node a device computed.
func (s *Side) ident(ph *phaseFold, backend string, n *nodeDesc, onDevice bool) int32 {
	if n.op != Undescribed {
		s.described++
	}
	if n.op == "FLASH_ATTN_EXT" {
		s.flash++
	}
	if i := kvCache(n.tensor); i >= 0 && s.kv[i] == "" {
		s.kv[i] = n.typ
	}
	k := idKey{kind: kindNode, backend: backend, op: s.opLabel(n.op, n.fused), stem: s.stem(n.tensor), layer: -1}
	if n.hasLayer {
		k.layer = int32(n.layer)
	}
	id := ph.table.id(k)
	d := &ph.table.list[id]
	d.onDevice = onDevice
	d.see(n.weight, n.shape[:n.dims])
	return id
}

// kvCache says which cache a node writes: 0 the K cache, 1 the V cache, -1 neither. Since
// 2025 llama.cpp names the caches cache_k_l#/cache_v_l#, and the nodes writing them are
// views of them; older releases copy into k_cache_view-#/v_cache_view-#.
func kvCache(name string) int {
	switch {
	case strings.HasPrefix(name, "cache_k"), strings.HasPrefix(name, "k_cache_view"):
		return 0
	case strings.HasPrefix(name, "cache_v"), strings.HasPrefix(name, "v_cache_view"):
		return 1
	}
	return -1
}

func (s *Side) stem(name string) string {
	if st, ok := s.stems[name]; ok {
		return st
	}
	st := stem(name)
	if len(s.stems) < maxStems {
		s.stems[name] = st
	}
	return st
}

func (s *Side) opLabel(op, fused string) string {
	if fused == "" {
		return op
	}
	k := [2]string{op, fused}
	if l, ok := s.ops[k]; ok {
		return l
	}
	l := op + "+" + fused
	if len(s.ops) < maxStems {
		s.ops[k] = l
	}
	return l
}

// nodeDesc is what the fold reads of a node span or a device's node event, in one pass
// over its attributes.
type nodeDesc struct {
	op, fused, weight, tensor, typ string
	layer, ns                      int64
	hasLayer                       bool
	shape                          [4]int64
	dims                           int
}

func (n *nodeDesc) read(attrs pcommon.Map) {
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case schema.GGMLOp:
			n.op = v.AsString()
		case schema.GGMLFusedOp:
			n.fused = v.AsString()
		case schema.GGMLWeightType:
			n.weight = v.AsString()
		case schema.GGMLTensorName:
			n.tensor = v.AsString()
		case schema.GGMLTensorType:
			n.typ = v.AsString()
		case schema.GGMLLayer:
			n.layer, n.hasLayer = schema.Integer(v), true
		case schema.GGMLDeviceNodeNS:
			n.ns = schema.Integer(v)
		case schema.GGMLTensorShape:
			if v.Type() == pcommon.ValueTypeSlice {
				sl := v.Slice()
				n.dims = min(sl.Len(), len(n.shape))
				for i := range n.dims {
					n.shape[i] = schema.Integer(sl.At(i))
				}
			}
		}
		return true
	})
}
