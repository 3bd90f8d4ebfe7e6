package summary

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/export"
	"github.com/profinfer/profinfer/internal/roofline"
)

// Limits bound the aggregator's memory.
const (
	maxProcesses  = 64                 // the least recently seen beyond these are forgotten
	maxTraces     = 8192               // trace → phase entries remembered, for nodes whose decode came earlier
	maxNodes      = 8192               // nodes kept of the timeline's graph
	maxWork       = 512                // device splits and copies kept of the timeline's decode
	timelineEvery = int64(time.Second) // the timeline's graph is replaced at most this often
	rateSeconds   = 600                // seconds of tokens-per-second history
	maxOps        = 256                // op rows per phase; the rest count as "other"
	maxLayers     = 1024               // layers per phase
	maxExperts    = 4096               // experts per MoE layer
	outside       = "outside decode"
	prefill       = "prefill"
	decode        = "decode"
	encode        = "encode"  // whisper.cpp's encoder passes
	compute       = "compute" // computations of no known runtime
	critical      = "ggml.critical_path"
	unknownValue  = "unknown"
)

// Aggregator folds pdata into per-process aggregates. It is not safe for concurrent
// use.
type Aggregator struct {
	procs  map[string]*proc
	phases *phaseMemo
}

// New returns an empty aggregator.
func New() *Aggregator {
	return &Aggregator{procs: map[string]*proc{}, phases: newPhaseMemo(maxTraces)}
}

type opKey struct{ op, weight string }

type proc struct {
	id, title, model string
	runtime          string
	resource         []KV
	lastSeen         time.Time
	nextWindow       time.Time // when its next sampling window opens, as last told
	phases           map[string]*phase
	latency          *logHistogram
	requests         Requests
	jobs             Jobs
	rtf              *logHistogram // real-time factors, as if seconds
	ttft, tpot       *logHistogram
	rate             []Rate // ring by second
	roofs, derived   Roofs
	timeline         *Timeline
	moeSpans         map[int][]int64
	moeMetric        map[int][]int64
	backends         map[string]*Backend
	loaded           []string
	copies           map[[2]string]*Copy
	counters         map[string]bool
	threads          int64      // the most threads a graph was computed with
	quota            quotaState // the cgroup CPU quota
}

type phase struct {
	Phase
	cpu ThreadsCPU
	// Seconds of the graphs whose threads had their CPUs, and tokens of those and of
	// the contended ones: the cost of contention is measured against the former.
	quietSeconds                              float64
	quietGraphs, quietTokens, contendedTokens int64
	ops                                       map[opKey]*Op
	layers                                    map[int]float64
	opLayer                                   map[string]map[int]float64 // by op
}

func (a *Aggregator) process(res pcommon.Resource) *proc {
	attrs := res.Attributes()
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	pid := str("process.pid")
	id := strings.Join([]string{str("host.name"), str("service.instance.id"), pid, str("process.executable.path")}, "\x00")
	p := a.procs[id]
	if p == nil {
		if len(a.procs) >= maxProcesses {
			a.forgetOldest()
		}
		p = &proc{id: id, phases: map[string]*phase{}, latency: newLogHistogram(), ttft: newLogHistogram(), tpot: newLogHistogram(), rtf: newLogHistogram(),
			moeSpans: map[int][]int64{}, moeMetric: map[int][]int64{},
			backends: map[string]*Backend{}, copies: map[[2]string]*Copy{}, counters: map[string]bool{}}
		a.procs[id] = p
	}
	// The model and context become known after the first decodes: refresh.
	p.title = cmp.Or(str("service.name"), str("process.executable.name"), "process") + " (pid " + cmp.Or(pid, "?") + ")"
	if h := str("host.name"); h != "" {
		p.title += " on " + h
	}
	p.model = cmp.Or(str("llama.model.name"), str("llama.model.path"), whisperModel(str), p.model)
	p.runtime = cmp.Or(str("ggml.runtime"), p.runtime)
	if v, ok := attrs.Get("ggml.backends.loaded"); ok && v.Type() == pcommon.ValueTypeSlice {
		p.loaded = p.loaded[:0]
		for i := 0; i < v.Slice().Len() && i < 16; i++ {
			p.loaded = append(p.loaded, v.Slice().At(i).AsString())
		}
	}
	p.resource = p.resource[:0]
	attrs.Range(func(k string, v pcommon.Value) bool {
		p.resource = append(p.resource, KV{k, v.AsString()})
		return len(p.resource) < 64
	})
	slices.SortFunc(p.resource, func(x, y KV) int { return strings.Compare(x.Key, y.Key) })
	p.lastSeen = time.Now()
	return p
}

// whisperModel names a whisper.cpp model from its resource attributes: "whisper tiny
// (F16)"; "" for other runtimes'.
func whisperModel(str func(string) string) string {
	t := str("whisper.model.type")
	if t == "" {
		return ""
	}
	if ft := str("whisper.model.file_type"); ft != "" {
		return "whisper " + t + " (" + ft + ")"
	}
	return "whisper " + t
}

func (a *Aggregator) forgetOldest() {
	var oldest *proc
	for _, p := range a.procs {
		if oldest == nil || p.lastSeen.Before(oldest.lastSeen) {
			oldest = p
		}
	}
	delete(a.procs, oldest.id)
}

func (p *proc) phase(name string) *phase {
	ph := p.phases[name]
	if ph == nil {
		ph = &phase{Phase: Phase{Name: name}, ops: map[opKey]*Op{}, layers: map[int]float64{},
			opLayer: map[string]map[int]float64{}}
		p.phases[name] = ph
	}
	return ph
}

// Traces folds a batch of spans in.
func (a *Aggregator) Traces(td ptrace.Traces) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		p := a.process(rs.Resource())
		// Decodes first: their phase is their nodes' phase.
		a.eachSpan(rs, func(s ptrace.Span) {
			switch {
			case s.Name() == "llama_decode":
				a.decode(p, s)
			case s.Name() == "whisper.transcription":
				p.job(s)
			case strAttr(s.Attributes(), "gen_ai.operation.name") != "":
				p.request(s)
			case isStep(s):
				a.step(p, s)
			}
		})
		graphs := map[pcommon.SpanID]*graphRef{}
		a.eachSpan(rs, func(s ptrace.Span) {
			switch s.Name() {
			case "llama_decode", "whisper.transcription":
			case "ggml.graph_compute":
				graphs[s.SpanID()] = a.graph(p, s)
			case "ggml.backend.graph_compute":
				a.split(p, s)
			case "ggml.device.compute":
				p.device(s)
			case "ggml.backend.tensor_copy":
				a.copy(p, s)
			default:
				if !isStep(s) && s.Name() != "ggml.backend_sched.graph_compute" { // the latter: older collectors' scheduler spans
					a.node(p, s, graphs[s.ParentSpanID()])
				}
			}
		})
		for _, g := range graphs {
			g.addTimes()
			if g.timeline != nil && len(g.timeline.Nodes) > 0 {
				a.deviceWork(rs, g)
				p.timeline = g.timeline
			}
		}
	}
}

// deviceWork gives g's timeline the device splits of its decode, and the copies queued to
// them: a decode's spans are exported together, so they are in rs.
func (a *Aggregator) deviceWork(rs ptrace.ResourceSpans, g *graphRef) {
	tl := g.timeline
	trace := g.trace
	at := func(ts pcommon.Timestamp) float64 { return float64(int64(ts)-int64(g.start)) / 1e3 }
	a.eachSpan(rs, func(s ptrace.Span) {
		if len(tl.Device) >= maxWork || s.TraceID() != trace {
			return
		}
		attrs := s.Attributes()
		w := Work{Start: at(s.StartTimestamp()), Duration: dur(s) * 1e6}
		switch {
		case s.Name() == "ggml.device.compute":
			w.Backend = strAttr(attrs, "ggml.backend")
			w.Wait = float64(intAttr(attrs, "ggml.device.wait_ns")) / 1e3
			w.Bound = boolAttr(attrs, "ggml.device.end_bound")
			w.Nodes = intAttr(attrs, "ggml.graph.nodes")
		case s.Name() == "ggml.backend.tensor_copy" && boolAttr(attrs, "ggml.copy.queued"):
			w.Backend = strAttr(attrs, "ggml.backend.destination")
			w.Copy = true
			w.Bytes = intAttr(attrs, "ggml.copy.bytes")
			w.Tensor = strAttr(attrs, "ggml.tensor.name")
		default:
			return
		}
		w.Backend = cmp.Or(w.Backend, unknownValue)
		tl.Device = append(tl.Device, w)
	})
}

func (a *Aggregator) eachSpan(rs ptrace.ResourceSpans, f func(ptrace.Span)) {
	for j := 0; j < rs.ScopeSpans().Len(); j++ {
		spans := rs.ScopeSpans().At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			f(spans.At(k))
		}
	}
}

func dur(s ptrace.Span) float64 {
	if s.EndTimestamp() < s.StartTimestamp() {
		return 0
	}
	return float64(s.EndTimestamp()-s.StartTimestamp()) / 1e9
}

func (a *Aggregator) decode(p *proc, s ptrace.Span) {
	attrs := s.Attributes()
	name := strAttr(attrs, "llama.phase")
	if name != prefill && name != decode {
		name = decode
	}
	tokens := intAttr(attrs, "llama.batch.tokens")
	a.phases.put(s.TraceID(), name, tokens)
	p.addStep(s, name, tokens)
}

// addStep counts step s (a llama_decode, or a runtime's other step) of tokens into phase
// name: its calls, tokens and time, its latency where it decodes one token, and the
// tokens per second of prefill and decode.
func (p *proc) addStep(s ptrace.Span, name string, tokens int64) {
	ph := p.phase(name)
	ph.Decodes++
	ph.Tokens += tokens
	ph.DecodeSeconds += dur(s)
	if name == decode {
		p.latency.add(dur(s))
	}
	if tokens > 0 && (name == prefill || name == decode) {
		p.addRate(s.EndTimestamp().AsTime().Unix(), name, tokens)
	}
}

// ggmlLayer are the spans of the GGML layer, which every runtime's steps hold.
var ggmlLayer = map[string]bool{"ggml.graph_compute": true, "ggml.backend.graph_compute": true,
	"ggml.device.compute": true, "ggml.backend.tensor_copy": true}

// isStep says whether s is a step of a runtime without llama_decode (whisper.encode,
// ollama.forward, a scheduler's computation of no known runtime): the spans that carry
// a phase, but the GGML layer's inside them.
func isStep(s ptrace.Span) bool {
	_, ok := s.Attributes().Get("ggml.phase")
	return ok && !ggmlLayer[s.Name()]
}

// step folds a step of a runtime without llama_decode into its phase, as decode a
// llama_decode: its graphs carry the phase themselves, as steps of one whisper
// transcription share a trace.
func (a *Aggregator) step(p *proc, s ptrace.Span) {
	attrs := s.Attributes()
	p.addStep(s, cmp.Or(strAttr(attrs, "ggml.phase"), compute), intAttr(attrs, "ggml.step.tokens"))
}

// phaseOf returns the phase and tokens of the step span s is inside: its own ggml.phase,
// else its trace's llama_decode's.
func (a *Aggregator) phaseOf(s ptrace.Span) (string, int64) {
	if v, ok := s.Attributes().Get("ggml.phase"); ok {
		return v.Str(), 0
	}
	return a.phases.get(s.TraceID())
}

// job sums a whisper transcription's span.
func (p *proc) job(s ptrace.Span) {
	attrs := s.Attributes()
	j := &p.jobs
	j.Count++
	audio := floatAttr(attrs, "whisper.audio.seconds")
	j.AudioSeconds += audio
	j.Seconds += dur(s)
	if audio > 0 {
		p.rtf.add(dur(s) / audio)
	}
	j.EncodePasses += intAttr(attrs, "whisper.encode.passes")
	j.EncodeSeconds += floatAttr(attrs, "whisper.encode.seconds")
	j.DecodePasses += intAttr(attrs, "whisper.decode.passes")
	j.DecodeSeconds += floatAttr(attrs, "whisper.decode.seconds")
}

// request sums a request span, but llama.cpp's warm-up at load, which no client asked for.
func (p *proc) request(s ptrace.Span) {
	attrs := s.Attributes()
	if boolAttr(attrs, "llama.request.warmup") {
		return
	}
	r := &p.requests
	r.Count++
	r.Input += intAttr(attrs, "llama.request.prompt_tokens")
	r.Cached += intAttr(attrs, "gen_ai.usage.cache_read.input_tokens")
	r.Output += intAttr(attrs, "gen_ai.usage.output_tokens")
	r.MaxShared = max(r.MaxShared, intAttr(attrs, "llama.request.shared_sequences.max"))
	if v, ok := attrs.Get("llama.request.time_to_first_token"); ok {
		p.ttft.add(v.Double())
	}
	if v, ok := attrs.Get("llama.request.time_per_output_token"); ok {
		p.tpot.add(v.Double())
	}
}

func (p *proc) addRate(sec int64, name string, tokens int64) {
	if n := len(p.rate); n == 0 || p.rate[n-1].Time < sec {
		p.rate = append(p.rate, Rate{Time: sec})
		if len(p.rate) > rateSeconds {
			p.rate = slices.Delete(p.rate, 0, len(p.rate)-rateSeconds)
		}
	}
	// Late batches land in their own second, or are dropped past the window.
	i, found := slices.BinarySearchFunc(p.rate, sec, func(r Rate, t int64) int { return cmp.Compare(r.Time, t) })
	if !found {
		if i == 0 && len(p.rate) >= rateSeconds {
			return
		}
		p.rate = slices.Insert(p.rate, i, Rate{Time: sec})
	}
	if name == prefill {
		p.rate[i].Prefill += tokens
	} else {
		p.rate[i].Decode += tokens
	}
}

// graphRef is what a graph's nodes need of it.
type graphRef struct {
	phase      *phase
	trace      pcommon.TraceID
	start, end pcommon.Timestamp
	timeline   *Timeline
	timed      []timed // its nodes, in order, until the batch's end adds their times
}

// timed is a node whose time is added once the next node's start is known.
type timed struct {
	op           *Op
	phase        *phase
	layer, bound int // -1: none
	start, end   pcommon.Timestamp
}

// add counts the node's time up to until: a node's span runs until its last thread
// leaves it, which overlaps the next node's start by the moments threads take to leave
// a barrier, and by much more when a thread was preempted there. Time counted to the
// next node's start adds up to the graph's time, so that shares are shares.
func (t *timed) add(until pcommon.Timestamp) {
	end := min(t.end, max(until, t.start))
	d := float64(end-t.start) / 1e9
	t.op.TotalMS += d * 1e3
	t.phase.NodeSeconds += d
	if t.bound >= 0 {
		t.op.boundNS[t.bound] += int64(d * 1e9)
	}
	if t.layer >= 0 {
		t.phase.layers[t.layer] += d
		byOp := t.phase.opLayer[t.op.Op]
		if byOp == nil {
			byOp = map[int]float64{}
			t.phase.opLayer[t.op.Op] = byOp
		}
		byOp[t.layer] += d
	}
}

// addTimes adds the time of a graph's nodes, each until the next one's start.
func (g *graphRef) addTimes() {
	for i := range g.timed {
		until := g.end
		if i+1 < len(g.timed) {
			until = g.timed[i+1].start
		}
		g.timed[i].add(until)
	}
	g.timed = nil
}

func (a *Aggregator) graph(p *proc, s ptrace.Span) *graphRef {
	attrs := s.Attributes()
	name, tokens := a.phaseOf(s)
	ph := p.phase(name)
	g := &graphRef{phase: ph, trace: s.TraceID(), start: s.StartTimestamp(), end: s.EndTimestamp()}
	threads := intAttr(attrs, "ggml.threads")
	p.threads = max(p.threads, threads)
	if v, ok := attrs.Get("ggml.graph.on_cpu_ns"); ok && threads > 0 {
		if boolAttr(attrs, "ggml.graph.on_cpu_perturbed") {
			ph.cpu.Perturbed++
		} else {
			ph.addCPU(dur(s), threads, float64(integer(v))/1e9, float64(intAttr(attrs, "ggml.graph.runqueue_ns"))/1e9, max(tokens, 1))
		}
	}
	if !boolAttr(attrs, "ggml.graph.traced") {
		return g
	}
	ph.TracedGraphs++
	ph.GraphSeconds += dur(s)
	// A decode's graph is the best example of a token, and a new one a second will do.
	if tl := p.timeline; tl != nil && !(name == decode && tl.Phase != decode) &&
		(name == outside || name != decode && tl.Phase == decode || int64(s.StartTimestamp())-tl.Start < timelineEvery) {
		return g
	}
	g.timeline = &Timeline{Phase: name, Tokens: tokens, Start: int64(s.StartTimestamp()),
		Duration: dur(s) * 1e6, Threads: int(intAttr(attrs, "ggml.threads")),
		Critical: float64(intAttr(attrs, "ggml.critical_path.duration_ns")) / 1e3}
	return g
}

// minQuiet is how many graphs whose threads had their CPUs the cost of contention needs
// as its measure.
const minQuiet = 3

// addCPU counts a graph of secs computed by threads threads, which had a CPU for onCPU
// seconds (summed over the process's threads) and waited for one wait seconds.
func (ph *phase) addCPU(secs float64, threads int64, onCPU, wait float64, tokens int64) {
	c := &ph.cpu
	c.Graphs++
	c.ThreadSeconds += secs * float64(threads)
	c.OnCPU += onCPU
	c.Wait += wait
	if onCPU < roofline.StarvedBelow*secs*float64(threads) {
		c.Contended++
		c.ContendedSeconds += secs
		ph.contendedTokens += tokens
	} else {
		ph.quietGraphs++
		ph.quietSeconds += secs
		ph.quietTokens += tokens
	}
}

// backend returns the sums of the backend s names; nil past 64 backends.
func (p *proc) backend(s ptrace.Span) *Backend {
	name := cmp.Or(strAttr(s.Attributes(), "ggml.backend"), unknownValue)
	b := p.backends[name]
	if b == nil && len(p.backends) < 64 {
		b = &Backend{Backend: name}
		p.backends[name] = b
	}
	return b
}

// device sums a device's work on a split, and counts the ops of its nodes.
func (p *proc) device(s ptrace.Span) {
	b := p.backend(s)
	if b == nil {
		return
	}
	b.DeviceSplits++
	b.DeviceSeconds += dur(s)
	b.WaitSeconds += float64(intAttr(s.Attributes(), "ggml.device.wait_ns")) / 1e9
	evs := s.Events()
	for i := 0; i < evs.Len(); i++ {
		if b.Ops == nil {
			b.Ops = map[string]int64{}
		}
		op := evs.At(i).Name()
		if b.Ops[op] == 0 && len(b.Ops) >= 128 {
			continue
		}
		b.Ops[op]++
		if ns, ok := evs.At(i).Attributes().Get("ggml.device.node_ns"); ok {
			if b.OpSeconds == nil {
				b.OpSeconds = map[string]float64{}
			}
			b.OpSeconds[op] += float64(ns.Int()) / 1e9
		}
	}
}

func (a *Aggregator) split(p *proc, s ptrace.Span) {
	b := p.backend(s)
	if b == nil {
		return
	}
	backend := b.Backend
	b.Splits++
	b.Seconds += dur(s)
	if backend != "CPU" {
		name, _ := a.phaseOf(s)
		p.phase(name).SplitSeconds += dur(s)
	}
}

func (a *Aggregator) copy(p *proc, s ptrace.Span) {
	attrs := s.Attributes()
	k := [2]string{cmp.Or(strAttr(attrs, "ggml.backend.source"), unknownValue), cmp.Or(strAttr(attrs, "ggml.backend.destination"), unknownValue)}
	c := p.copies[k]
	if c == nil {
		if len(p.copies) >= 64 {
			return
		}
		c = &Copy{Source: k[0], Destination: k[1]}
		p.copies[k] = c
	}
	c.Copies++
	c.Bytes += intAttr(attrs, "ggml.copy.bytes")
	c.Seconds += dur(s)
	name, _ := a.phaseOf(s)
	p.phase(name).CopySeconds += dur(s)
}

var boundIndex = map[string]int{"memory": 0, "compute": 1, "overhead": 2, "starved": 3}

// BoundNames are the verdicts by index.
var boundNames = [4]string{"memory", "compute", "overhead", "starved"}

// nodeAttrs is what the summary reads of a node span, gathered in one pass over its
// attributes: at full tracing the view folds some 14 000 spans a second, on the cores
// the model uses.
type nodeAttrs struct {
	op, weight, bound, tensor                   string
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
		case "ggml.op":
			n.op = v.Str()
		case "ggml.weight.type":
			n.weight = v.Str()
		case "ggml.roofline.bound":
			n.bound = v.Str()
		case "ggml.tensor.name":
			n.tensor = v.Str()
		case "ggml.flops":
			n.flops = number(v)
		case "ggml.bytes":
			n.bytes = number(v)
		case "ggml.roofline.peak_fraction":
			n.fraction = number(v)
		case "ggml.roofline.flops_per_second":
			n.flopsRate = number(v)
		case "ggml.roofline.bytes_per_second":
			n.byteRate = number(v)
		case "ggml.threads":
			n.threads = integer(v)
		case "ggml.layer":
			n.layer, n.hasLayer = integer(v), true
		case "ggml.sched.off_cpu_ns":
			n.offCPU = integer(v)
		case "ggml.sched.runqueue_ns":
			n.runq = integer(v)
		case "ggml.barrier.wait_ns":
			n.barrier = integer(v)
		case "ggml.sched.preemptions":
			n.preemptions = integer(v)
		case "ggml.sched.migrations":
			n.migrations = integer(v)
		case critical:
			n.critical = v.Type() == pcommon.ValueTypeBool && v.Bool()
		case "ggml.moe.experts":
			if v.Type() == pcommon.ValueTypeSlice {
				n.experts, n.hasExperts = v.Slice(), true
			}
		case "ggml.thread.busy_ns":
			if v.Type() == pcommon.ValueTypeSlice {
				n.busy, n.hasBusy = v.Slice(), true
			}
		default:
			if c, ok := strings.CutPrefix(k, "perf."); ok && v.Type() == pcommon.ValueTypeInt && len(n.perf) < 16 {
				n.perf = append(n.perf, perfValue{c, v.Int()})
			}
		}
		return true
	})
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
	d := dur(s)
	o.Calls++
	o.flops += n.flops
	o.byt += n.bytes
	t := timed{op: o, phase: ph, layer: -1, bound: -1, start: s.StartTimestamp(), end: s.EndTimestamp()}
	if b, ok := boundIndex[n.bound]; ok {
		t.bound = b
		p.derive(&n, b)
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
// the roof it reached), for input that lacks profinfer.roofline.peak.
func (p *proc) derive(n *nodeAttrs, bound int) {
	if n.fraction <= 0 {
		return
	}
	switch bound {
	case 0:
		p.derived.Bandwidth = n.byteRate / n.fraction
	case 1:
		p.derived.FLOPS = n.flopsRate / n.fraction
	}
}

// Metrics folds a batch of metrics in: the roofs, and MoE selections, which count every
// traced graph even where spans are thinned.
func (a *Aggregator) Metrics(md pmetric.Metrics) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if _, ok := rm.Resource().Attributes().Get("process.pid"); !ok {
			continue // the receiver's own health
		}
		var p *proc
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Name() {
				case "profinfer.roofline.peak":
					p = cmp.Or(p, a.process(rm.Resource()))
					p.roof(m.Gauge().DataPoints())
				case "ggml.moe.expert.selections":
					p = cmp.Or(p, a.process(rm.Resource()))
					p.selections(m.Sum().DataPoints())
				case "profinfer.window.next":
					p = cmp.Or(p, a.process(rm.Resource()))
					if dps := m.Gauge().DataPoints(); dps.Len() > 0 {
						dp := dps.At(dps.Len() - 1)
						p.nextWindow = dp.Timestamp().AsTime().Add(time.Duration(dp.DoubleValue() * float64(time.Second)))
					}
				case "profinfer.cgroup.cpu.limit", "profinfer.cgroup.cpu.periods", "profinfer.cgroup.cpu.throttled.periods", "profinfer.cgroup.cpu.throttled.time":
					p = cmp.Or(p, a.process(rm.Resource()))
					p.quotaMetric(m)
				}
			}
		}
	}
}

func (p *proc) roof(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		attrs := dp.Attributes()
		v := dp.DoubleValue()
		switch strAttr(attrs, "ggml.roofline.roof") {
		case "flops":
			p.roofs.FLOPS = v
		case "bandwidth":
			p.roofs.Bandwidth = v
		case "int8":
			p.roofs.Int8 = v
		}
		p.roofs.Source = strAttr(attrs, "profinfer.roofline.source")
		p.roofs.Measured = strAttr(attrs, "profinfer.roofline.measured")
	}
}

func (p *proc) selections(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		layer := int(intAttr(dp.Attributes(), "ggml.layer"))
		e := int(intAttr(dp.Attributes(), "ggml.moe.expert"))
		if e < 0 || e >= maxExperts || layer < 0 || layer >= maxLayers {
			continue
		}
		c := p.moeMetric[layer]
		if e >= len(c) {
			c = append(c, make([]int64, e+1-len(c))...)
		}
		c[e] = dp.IntValue() // cumulative: the newest count is the count
		p.moeMetric[layer] = c
	}
}

// quotaMetric reads one of the cgroup quota metrics. Throttling counts from the first
// reading of the cgroup, so that it is what happened while profiled.
func (p *proc) quotaMetric(m pmetric.Metric) {
	var dps pmetric.NumberDataPointSlice
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps = m.Gauge().DataPoints()
	case pmetric.MetricTypeSum:
		dps = m.Sum().DataPoints()
	default:
		return
	}
	q := &p.quota
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if path := strAttr(dp.Attributes(), "profinfer.cgroup.path"); path != q.cgroup {
			*q = quotaState{cgroup: path}
		}
		v := dp.DoubleValue()
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			v = float64(dp.IntValue())
		}
		switch m.Name() {
		case "profinfer.cgroup.cpu.limit":
			q.cpus = v
		case "profinfer.cgroup.cpu.periods":
			q.periods.set(v)
		case "profinfer.cgroup.cpu.throttled.periods":
			q.throttled.set(v)
		case "profinfer.cgroup.cpu.throttled.time":
			q.throttledTime.set(v)
		}
	}
}

// quotaState is a cgroup CPU quota as the metrics gave it.
type quotaState struct {
	cgroup                            string
	cpus                              float64
	periods, throttled, throttledTime counter
}

// counter is a cumulative metric's first and latest values.
type counter struct {
	first, last float64
	seen        bool
}

func (c *counter) set(v float64) {
	if !c.seen {
		c.first, c.seen = v, true
	}
	c.last = v
}

// delta is the count between the first and the latest reading, or, all: the count since
// the counter began.
func (c counter) delta(all bool) float64 {
	if all {
		return c.last
	}
	return c.last - c.first
}

// Snapshot returns the view as of now, the busiest process first.
func (a *Aggregator) Snapshot() *View {
	v := &View{Generated: time.Now().UTC()}
	for _, p := range a.procs {
		v.Processes = append(v.Processes, p.snapshot())
	}
	// The busiest first: the page opens on it.
	slices.SortFunc(v.Processes, func(x, y *Process) int {
		return cmp.Or(cmp.Compare(y.tokens(), x.tokens()), strings.Compare(x.Title+x.ID, y.Title+y.ID))
	})
	return v
}

func (p *Process) tokens() int64 {
	var n int64
	for _, ph := range p.Phases {
		n += ph.Tokens
	}
	return n
}

func (p *proc) snapshot() *Process {
	out := &Process{ID: p.id, Title: p.title, Model: p.model, Runtime: p.runtime, Resource: slices.Clone(p.resource),
		Roofs: p.roofs, Rate: slices.Clone(p.rate), Timeline: p.timeline, LastSeen: p.lastSeen.UTC(),
		Latency: p.latency.quantiles(), Findings: []Finding{}}
	if !p.nextWindow.IsZero() {
		out.NextWindow = p.nextWindow.UTC()
	}
	if p.requests.Count > 0 {
		r := p.requests
		r.TTFT, r.TPOT = p.ttft.quantiles(), p.tpot.quantiles()
		out.Requests = &r
	}
	if p.jobs.Count > 0 {
		j := p.jobs
		q := p.rtf.quantiles() // kept as if seconds
		j.RTF = Quantiles{Count: q.Count, P50: q.P50 / 1e3, P90: q.P90 / 1e3, P99: q.P99 / 1e3, Max: q.Max / 1e3}
		out.Jobs = &j
	}
	if out.Roofs.FLOPS == 0 && out.Roofs.Bandwidth == 0 && p.derived != (Roofs{}) {
		out.Roofs = p.derived
		out.Roofs.Source = "derived from the spans' peak fractions"
	}
	for _, name := range []string{prefill, encode, decode, compute, outside} {
		if ph := p.phases[name]; ph != nil {
			out.Phases = append(out.Phases, ph.snapshot(out.Roofs))
		}
	}
	moe := p.moeMetric
	if len(moe) == 0 {
		moe = p.moeSpans
	}
	for layer, c := range moe {
		out.MoE = append(out.MoE, MoELayer{Layer: layer, Selections: slices.Clone(c), Imbalance: export.Imbalance(c)})
	}
	slices.SortFunc(out.MoE, func(x, y MoELayer) int { return cmp.Compare(x.Layer, y.Layer) })
	for _, b := range p.backends {
		c := *b
		c.Ops = maps.Clone(b.Ops)
		out.Backends = append(out.Backends, c)
	}
	out.Loaded = slices.Clone(p.loaded)
	slices.SortFunc(out.Backends, func(x, y Backend) int { return strings.Compare(x.Backend, y.Backend) })
	for _, c := range p.copies {
		out.Copies = append(out.Copies, *c)
	}
	slices.SortFunc(out.Copies, func(x, y Copy) int {
		return strings.Compare(x.Source+"\x00"+x.Destination, y.Source+"\x00"+y.Destination)
	})
	for c := range p.counters {
		out.Counters = append(out.Counters, c)
	}
	slices.Sort(out.Counters)
	if q := p.quota; q.cpus > 0 {
		// No period passed between the readings (one reading, or one and its repeat
		// as the process exited): what the cgroup counted since it was made.
		all := q.periods.first == q.periods.last
		out.Quota = &Quota{Cgroup: q.cgroup, CPUs: q.cpus, Periods: int64(q.periods.delta(all)), Throttled: int64(q.throttled.delta(all)),
			ThrottledSeconds: q.throttledTime.delta(all), SinceMade: all, Threads: p.threads}
	}
	return out
}

func (ph *phase) snapshot(roofs Roofs) *Phase {
	out := ph.Phase
	out.Ops = nil
	if out.DecodeSeconds > 0 {
		out.TokensPerSec = float64(out.Tokens) / out.DecodeSeconds
	}
	if c := ph.cpu; c.Graphs > 0 || c.Perturbed > 0 {
		c.Share = min(c.OnCPU/max(c.ThreadSeconds, 1e-12), 1)
		c.Starved = roofline.IsStarved(c.Share, c.Graphs, c.ThreadSeconds)
		if ph.quietGraphs >= minQuiet && ph.contendedTokens > 0 {
			c.Cost = max(c.ContendedSeconds-float64(ph.contendedTokens)*ph.quietSeconds/float64(ph.quietTokens), 0)
		}
		out.CPU = &c
	}
	total := cmp.Or(out.GraphSeconds, out.NodeSeconds)
	for _, o := range ph.ops {
		r := *o
		r.Counters = maps.Clone(o.Counters)
		r.MeanUS = r.TotalMS * 1e3 / float64(max(r.Calls, 1))
		if total > 0 {
			r.Share = r.TotalMS / 1e3 / total
		}
		if secs := r.TotalMS / 1e3; secs > 0 && r.flops > 0 {
			r.FLOPS = r.flops / secs
			r.Bandwidth = r.byt / secs
		}
		if r.byt > 0 {
			r.Intensity = r.flops / r.byt
		}
		r.Bound, r.PeakFrac = verdict(&r, roofs, out.CPU != nil && out.CPU.Starved)
		out.Ops = append(out.Ops, &r)
	}
	slices.SortFunc(out.Ops, func(x, y *Op) int {
		return cmp.Or(cmp.Compare(y.TotalMS, x.TotalMS), strings.Compare(x.Op+x.Weight, y.Op+y.Weight))
	})
	for l, secs := range ph.layers {
		out.Layers = append(out.Layers, Layer{Layer: l, Seconds: secs, Share: secs / max(total, 1e-12)})
	}
	slices.SortFunc(out.Layers, func(x, y Layer) int { return cmp.Compare(x.Layer, y.Layer) })
	out.OpLayer = ph.opLayerMatrix(out.Layers)
	return &out
}

// verdict is the bound that held for most of an op's time, as the receiver classified
// its nodes, and how close its aggregate rate came to that roof. Whether its threads
// were starved is the phase's verdict (starved), over all the phase's graphs, so that an
// op is never judged by other evidence than its phase: nodes judged starved over their
// process's latest graphs count for no roof where the phase as a whole was not.
func verdict(o *Op, roofs Roofs, starved bool) (string, float64) {
	if starved {
		return boundNames[boundIndex["starved"]], 0
	}
	best := -1
	for i, ns := range o.boundNS {
		if ns > 0 && boundNames[i] != "starved" && (best < 0 || ns > o.boundNS[best]) {
			best = i
		}
	}
	if best < 0 {
		return "", 0
	}
	frac := 0.0
	switch {
	case o.Intensity > 0 && roofs.Bandwidth > 0 && roofs.FLOPS > 0 && o.Intensity < roofs.FLOPS/roofs.Bandwidth:
		frac = o.Bandwidth / roofs.Bandwidth
	case roofs.FLOPS > 0:
		frac = o.FLOPS / roofs.FLOPS
	}
	return boundNames[best], frac
}

// opLayerMatrix keeps the ops that took the most layer time, at most 16 rows.
func (ph *phase) opLayerMatrix(layers []Layer) *OpLayer {
	if len(layers) == 0 {
		return nil
	}
	type row struct {
		op    string
		secs  float64
		cells map[int]float64
	}
	var rows []row
	for op, cells := range ph.opLayer {
		r := row{op: op, cells: cells}
		for _, s := range cells {
			r.secs += s
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y row) int { return cmp.Or(cmp.Compare(y.secs, x.secs), strings.Compare(x.op, y.op)) })
	rows = rows[:min(len(rows), 16)]
	m := &OpLayer{}
	for _, l := range layers {
		m.Layers = append(m.Layers, l.Layer)
	}
	for _, r := range rows {
		m.Ops = append(m.Ops, r.op)
		cells := make([]float64, len(layers))
		for i, l := range layers {
			cells[i] = r.cells[l.Layer]
		}
		m.Seconds = append(m.Seconds, cells)
	}
	return m
}

func strAttr(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

func intAttr(m pcommon.Map, k string) int64 {
	if v, ok := m.Get(k); ok {
		return integer(v)
	}
	return 0
}

func floatAttr(m pcommon.Map, k string) float64 {
	if v, ok := m.Get(k); ok {
		return number(v)
	}
	return 0
}

// integer reads an int attribute, or a double one, or a decimal string (OTLP JSON may
// carry ints as strings).
func integer(v pcommon.Value) int64 {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return int64(v.Double())
	case pcommon.ValueTypeStr:
		n, _ := strconv.ParseInt(v.Str(), 10, 64)
		return n
	}
	return 0
}

// number reads a double attribute, or an int one.
func number(v pcommon.Value) float64 {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeInt:
		return float64(v.Int())
	}
	return 0
}

func boolAttr(m pcommon.Map, k string) bool {
	v, ok := m.Get(k)
	return ok && v.Type() == pcommon.ValueTypeBool && v.Bool()
}
