// Package export turns assembled decodes and graphs into OpenTelemetry pdata: spans for
// llama_decode, graph computations and graph nodes, and cumulative per-op metrics.
package export

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/dag"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/roofline"
)

// Origin is the process a span or metric comes from: its resource.
type Origin struct {
	PID, VPID int
	Exe       string // as the process sees it
	BuildID   string
	GGML      string      // ggml_version(); empty for releases without one
	Container string      // container.id; empty outside containers
	Backends  string      // GGML backends besides the CPU's it loaded as libraries, comma-separated
	Runtime   string      // ggml.runtime: llama.cpp, whisper.cpp, ollama or ggml
	Model     *model.Info // nil until the process has loaded one
	// Whisper is its whisper.cpp model, nil until its first transcription was read.
	Whisper *model.Whisper
	// CtxSize and CtxThreads are its llama_context's n_ctx and n_threads; 0 until a
	// decode showed them.
	CtxSize, CtxThreads int
}

// Resource is p's resource with the semantic-convention attributes rb's configuration
// enables (resource_attributes.<name>.enabled).
func (p *Origin) Resource(rb *metadata.ResourceBuilder) pcommon.Resource {
	name := p.Exe[strings.LastIndexByte(p.Exe, '/')+1:]
	rb.SetServiceName(name)
	rb.SetProcessPid(int64(p.PID))
	rb.SetProcessVpid(int64(p.VPID))
	rb.SetProcessExecutablePath(p.Exe)
	rb.SetProcessExecutableName(name)
	if p.BuildID != "" {
		rb.SetProcessExecutableBuildIDGnu(p.BuildID)
	}
	if p.GGML != "" {
		rb.SetGgmlVersion(p.GGML)
	}
	if p.Container != "" {
		rb.SetContainerID(p.Container)
	}
	if p.Runtime != "" {
		rb.SetGgmlRuntime(p.Runtime)
	}
	if w := p.Whisper; w != nil {
		rb.SetWhisperModelType(w.Type)
		rb.SetWhisperModelVocabulary(int64(w.Vocab))
		rb.SetWhisperModelAudioContext(int64(w.AudioCtx))
		rb.SetWhisperModelAudioState(int64(w.AudioState))
		rb.SetWhisperModelAudioHeads(int64(w.AudioHeads))
		rb.SetWhisperModelAudioLayers(int64(w.AudioLayers))
		rb.SetWhisperModelTextContext(int64(w.TextCtx))
		rb.SetWhisperModelTextState(int64(w.TextState))
		rb.SetWhisperModelTextHeads(int64(w.TextHeads))
		rb.SetWhisperModelTextLayers(int64(w.TextLayers))
		rb.SetWhisperModelMels(int64(w.Mels))
		rb.SetWhisperModelFileType(w.FileType)
	}
	if p.Backends != "" {
		var loaded []any
		for b := range strings.SplitSeq(p.Backends, ",") {
			loaded = append(loaded, b)
		}
		rb.SetGgmlBackendsLoaded(loaded)
	}
	if m := p.Model; m != nil {
		rb.SetLlamaModelPath(m.Path)
		rb.SetLlamaModelName(m.Name)
		rb.SetLlamaModelArchitecture(m.Architecture)
		rb.SetLlamaModelParameters(int64(m.Parameters))
		rb.SetLlamaModelFileType(m.FileType)
		rb.SetLlamaModelContextLength(int64(m.ContextLength))
	}
	if p.CtxSize > 0 {
		rb.SetLlamaContextSize(int64(p.CtxSize))
	}
	if p.CtxThreads > 0 {
		rb.SetLlamaContextThreads(int64(p.CtxThreads))
	}
	return rb.Emit()
}

// Clock converts kernel CLOCK_MONOTONIC nanoseconds to wall-clock time, with an offset
// taken once at start, as eBPF timestamps are monotonic.
type Clock struct{ Offset int64 }

// Time converts a monotonic timestamp.
func (c Clock) Time(mono uint64) pcommon.Timestamp {
	return pcommon.Timestamp(uint64(int64(mono) + c.Offset))
}

// Phase names a decode by its batch: more than one token is prefill.
func Phase(tokens int) string {
	if tokens > 1 {
		return "prefill"
	}
	return "decode"
}

// Spans builds traces. It is not safe for concurrent use.
type Spans struct {
	Clock    Clock
	Nodes    bool           // emit a span per node, not only decode and graph spans
	Peaks    roofline.Peaks // classify nodes under this roofline; zero: do not
	Counters *Counters      // the perf counters nodes carry; nil: none
	// Resources says which resource attributes spans carry, all by default; set it
	// before the first span.
	Resources metadata.ResourceAttributesConfig
	rb        *metadata.ResourceBuilder // of Resources, made at first use; Emit resets it
	rng       *rand.PCG
	batch     ptrace.Traces          // the traces scopes are in
	scopes    map[*Origin]scopeSpans // each process's spans in batch
}

// scopeSpans is a process's span slice in a batch, and what its resource was made from.
type scopeSpans struct {
	origin Origin
	spans  ptrace.SpanSlice
}

// NewSpans returns a span builder.
func NewSpans(clock Clock, nodes bool, peaks roofline.Peaks, counters *Counters) *Spans {
	return &Spans{Clock: clock, Nodes: nodes, Peaks: peaks, Counters: counters,
		Resources: metadata.DefaultResourceAttributesConfig(), scopes: map[*Origin]scopeSpans{},
		rng: rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15)}
}

func (s *Spans) traceID() pcommon.TraceID {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], s.rng.Uint64())
	binary.LittleEndian.PutUint64(id[8:], s.rng.Uint64())
	return id
}

func (s *Spans) spanID() pcommon.SpanID {
	var id [8]byte
	binary.LittleEndian.PutUint64(id[:], s.rng.Uint64()|1)
	return id
}

// scope returns the span slice for process p in td, adding its resource on first use: one
// a process a batch while p stays the same. A token's spans are few, and its resource
// as many attributes again.
func (s *Spans) scope(td ptrace.Traces, p *Origin) ptrace.SpanSlice {
	if s.batch != td {
		s.batch = td
		clear(s.scopes)
	}
	if sc, ok := s.scopes[p]; ok && sc.origin == *p {
		return sc.spans
	}
	rs := td.ResourceSpans().AppendEmpty()
	if s.rb == nil {
		s.rb = metadata.NewResourceBuilder(s.Resources)
	}
	p.Resource(s.rb).MoveTo(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName) // the metrics' scope too
	s.scopes[p] = scopeSpans{origin: *p, spans: ss.Spans()}
	return ss.Spans()
}

// decodeAttrs and graphAttrs are the most attributes a decode span and a graph span without
// node spans get, so that each map is allocated once: every token makes one of each.
const (
	decodeAttrs = 8
	graphAttrs  = 9
)

// Step appends a step's span (llama_decode, or a scheduler's computation named by the
// process's runtime), its graph spans and their node spans to td, and returns the step's
// span, for the requests it carried to link to. A step inside a job is its span's child.
func (s *Spans) Step(td ptrace.Traces, p *Origin, d *assemble.Step) requests.Link {
	spans := s.scope(td, p)
	sp := spans.AppendEmpty()
	trace, parent := s.traceID(), pcommon.NewSpanIDEmpty()
	if j := d.Job; j != nil {
		trace, parent = s.jobIDs(j)
	}
	if d.Kind == assemble.LlamaDecode {
		s.decode(sp, trace, parent, d)
	} else {
		s.compute(sp, trace, parent, d)
	}
	// Copies before splits: a viewer draws the copies a device queued as flowing into
	// the device's next split (perfetto).
	for i := range d.Copies {
		c := &d.Copies[i]
		putPhase(s.copy(spans.AppendEmpty(), trace, sp.SpanID(), c), d)
	}
	splits := make([]pcommon.SpanID, len(d.Splits))
	for i := range d.Splits {
		sl := &d.Splits[i]
		split := spans.AppendEmpty()
		splits[i] = s.split(split, trace, sp.SpanID(), sl)
		putPhase(split, d)
		if sl.Device && sl.Done != 0 {
			s.device(spans.AppendEmpty(), trace, splits[i], sl)
		}
	}
	// A CPU graph runs inside its split, on the same thread.
	for _, g := range d.Graphs {
		parent := enclosing(sp.SpanID(), splits, func(i int) (uint32, uint64, uint64) {
			return d.Splits[i].TID, d.Splits[i].Start, d.Splits[i].End
		}, g.TID, g.Start, g.End)
		putPhase(s.graph(spans, trace, parent, g), d)
	}
	return requests.Link{Trace: trace, Span: sp.SpanID()}
}

// decode makes sp a llama_decode span.
func (s *Spans) decode(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, d *assemble.Step) {
	s.begin(sp, trace, parent, "llama_decode", d.Start, d.End)
	a := sp.Attributes()
	a.EnsureCapacity(decodeAttrs)
	a.PutInt("llama.batch.tokens", int64(d.Tokens))
	a.PutStr("llama.phase", Phase(d.Tokens))
	a.PutInt("llama.decode.result", int64(d.Result))
	a.PutInt("thread.id", int64(d.TID))
	putBatch(a, &d.Batch)
	if d.Result != 0 {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("llama_decode returned " + strconv.Itoa(d.Result))
	}
}

// SchedComputeSpan is the name of a scheduler's computation whose runtime gives it none.
const SchedComputeSpan = "ggml.backend_sched.graph_compute"

// compute makes sp the span of a scheduler's computation of a graph, as the process's
// runtime named it (whisper.encode, ollama.forward, …).
func (s *Spans) compute(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, d *assemble.Step) {
	name := d.Name
	if name == "" {
		name = SchedComputeSpan
	}
	s.begin(sp, trace, parent, name, d.Start, d.End)
	a := sp.Attributes()
	a.EnsureCapacity(decodeAttrs)
	a.PutStr("ggml.phase", d.Phase)
	if d.Stage != "" {
		a.PutStr("ggml.step.stage", d.Stage)
	}
	if d.Tokens > 0 {
		a.PutInt("ggml.step.tokens", int64(d.Tokens))
	}
	if h := d.Head; h != nil {
		a.PutInt("ggml.graph.nodes", int64(h.Nodes))
		a.PutInt("ggml.sched.backends", int64(h.Backends))
		if h.First != nil && name == SchedComputeSpan { // what tells it apart, for a runtime profinfer does not know
			a.PutStr("ggml.step.first_node", h.First.Op+" "+h.First.Name)
		}
	}
	a.PutInt("thread.id", int64(d.TID))
	if d.Result != 0 {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(name + " returned " + strconv.Itoa(d.Result))
	}
}

// jobIDs returns the trace and span of job j's span, made at the first span inside it.
func (s *Spans) jobIDs(j *assemble.Job) (pcommon.TraceID, pcommon.SpanID) {
	if j.Span == ([8]byte{}) {
		j.Trace, j.Span = s.traceID(), s.spanID()
	}
	return j.Trace, j.Span
}

// SampleRate is the rate of the audio whisper.cpp takes, samples a second.
const SampleRate = 16000

// Job appends a job's span: whisper.cpp's transcription (whisper.transcription), with the
// audio it was given, its real-time factor (its time over the audio's) and its steps'
// time by phase. The steps inside it are its children.
func (s *Spans) Job(td ptrace.Traces, p *Origin, j *assemble.Job) {
	sp := s.scope(td, p).AppendEmpty()
	trace, id := s.jobIDs(j)
	sp.SetTraceID(trace)
	sp.SetSpanID(id)
	sp.SetName("whisper.transcription")
	sp.SetStartTimestamp(s.Clock.Time(j.Start))
	sp.SetEndTimestamp(s.Clock.Time(j.End))
	a := sp.Attributes()
	audio := float64(j.Samples) / SampleRate
	a.PutDouble("whisper.audio.seconds", audio)
	if audio > 0 {
		a.PutDouble("whisper.real_time_factor", float64(j.End-j.Start)/1e9/audio)
	}
	for _, ph := range [...]string{"encode", "decode"} {
		a.PutInt("whisper."+ph+".passes", int64(j.Phases[ph].Steps))
		a.PutDouble("whisper."+ph+".seconds", float64(j.Phases[ph].NS)/1e9)
	}
	a.PutInt("thread.id", int64(j.TID))
	if j.Dropped {
		a.PutBool("profinfer.records_lost", true)
	}
	if j.Result != 0 {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("whisper_full returned " + strconv.Itoa(j.Result))
	}
}

// enclosing returns the span among ids whose extent, on thread tid, holds start to end;
// else parent.
func enclosing(parent pcommon.SpanID, ids []pcommon.SpanID, extent func(int) (uint32, uint64, uint64), tid uint32, start, end uint64) pcommon.SpanID {
	for i, id := range ids {
		if t, s, e := extent(i); t == tid && s <= start && end <= e {
			return id
		}
	}
	return parent
}

func (s *Spans) split(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, sl *assemble.Split) pcommon.SpanID {
	s.begin(sp, trace, parent, "ggml.backend.graph_compute", sl.Start, sl.End)
	a := sp.Attributes()
	a.EnsureCapacity(3)
	a.PutStr("ggml.backend", sl.Backend)
	a.PutInt("ggml.graph.nodes", int64(sl.NNodes))
	a.PutInt("thread.id", int64(sl.TID))
	return sp.SpanID()
}

// device is a device's work on a split: from its handing over to the end of the CPU's
// wait that saw it done, a bound on when it ended (ggml.device.end_bound) unless the CPU
// was waiting then. Its nodes are events, at the handing over: those the device timed
// itself where it did, else those read from its graph, untimed.
func (s *Spans) device(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, sl *assemble.Split) {
	s.begin(sp, trace, parent, "ggml.device.compute", sl.Start, sl.Done)
	a := sp.Attributes()
	a.PutStr("ggml.backend", sl.Backend)
	a.PutInt("ggml.graph.nodes", int64(sl.NNodes))
	a.PutInt("ggml.device.wait_ns", int64(sl.Wait))
	a.PutBool("ggml.device.end_bound", sl.Bound)
	a.PutInt("thread.id", int64(sl.TID))
	if len(sl.Timed) > 0 {
		s.timedNodes(sp, sl, len(sl.Nodes) > 0)
		return
	}
	if len(sl.Nodes) == 0 {
		return
	}
	a.PutInt("ggml.graph.nodes.described", int64(len(sl.Nodes)))
	evs := sp.Events()
	evs.EnsureCapacity(len(sl.Nodes))
	at := s.Clock.Time(sl.Start)
	for _, info := range sl.Nodes {
		ev := evs.AppendEmpty()
		ev.SetName(info.Op)
		ev.SetTimestamp(at)
		putNodeInfo(ev.Attributes(), info)
	}
}

// timedNodes sums the nodes a device timed itself on its split's span
// (ggml.graph.nodes.timed, ggml.device.timed_ns, which the span's extent bounds) and, where
// the split's nodes were read (a sampling window, or full tracing), makes them its events,
// each with its label and the device's time for it (ggml.device.node_ns) where it came.
func (s *Spans) timedNodes(sp ptrace.Span, sl *assemble.Split, events bool) {
	var timed, sum int64
	for _, n := range sl.Timed {
		if n.Known {
			timed++
			sum += int64(n.NS)
		}
	}
	a := sp.Attributes()
	a.PutInt("ggml.graph.nodes.timed", timed)
	a.PutInt("ggml.device.timed_ns", sum)
	if !events {
		return
	}
	evs := sp.Events()
	evs.EnsureCapacity(len(sl.Timed))
	at := s.Clock.Time(sl.Start)
	for _, n := range sl.Timed {
		ev := evs.AppendEmpty()
		ev.SetName(n.Info.Op)
		ev.SetTimestamp(at)
		putNodeInfo(ev.Attributes(), n.Info)
		ev.Attributes().PutStr("ggml.device.label", n.Label)
		if n.Known {
			ev.Attributes().PutInt("ggml.device.node_ns", int64(n.NS))
		}
	}
}

// putPhase gives sp, a span inside step d, the step's phase where d is a scheduler's
// computation: whisper's steps share their transcription's trace, which therefore does
// not tell a graph's phase, as a llama_decode's trace does.
func putPhase(sp ptrace.Span, d *assemble.Step) {
	if d.Kind == assemble.SchedCompute {
		sp.Attributes().PutStr("ggml.phase", d.Phase)
	}
}

func (s *Spans) copy(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, c *assemble.Copy) ptrace.Span {
	s.begin(sp, trace, parent, "ggml.backend.tensor_copy", c.Start, c.End)
	a := sp.Attributes()
	a.PutStr("ggml.backend.source", c.Src)
	a.PutStr("ggml.backend.destination", c.Dst)
	a.PutStr("ggml.tensor.name", c.Tensor)
	a.PutInt("ggml.copy.bytes", c.Bytes)
	if c.Queued {
		a.PutBool("ggml.copy.queued", true)
	}
	a.PutInt("thread.id", int64(c.TID))
	return sp
}

// begin gives sp its identity, name and extent.
func (s *Spans) begin(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, name string, start, end uint64) {
	sp.SetTraceID(trace)
	sp.SetSpanID(s.spanID())
	sp.SetParentSpanID(parent)
	sp.SetName(name)
	sp.SetStartTimestamp(s.Clock.Time(start))
	sp.SetEndTimestamp(s.Clock.Time(end))
}

// Graph appends a graph computed outside llama_decode, as the root of its own trace.
func (s *Spans) Graph(td ptrace.Traces, p *Origin, g *assemble.Graph) {
	s.graph(s.scope(td, p), s.traceID(), pcommon.NewSpanIDEmpty(), g)
}

func (s *Spans) graph(spans ptrace.SpanSlice, trace pcommon.TraceID, parent pcommon.SpanID, g *assemble.Graph) ptrace.Span {
	sp := spans.AppendEmpty()
	s.begin(sp, trace, parent, "ggml.graph_compute", g.Start, g.End)
	a := sp.Attributes()
	a.EnsureCapacity(graphAttrs)
	a.PutInt("ggml.graph.nodes", int64(g.NNodes))
	a.PutBool("ggml.graph.traced", g.Traced)
	if g.Traced {
		a.PutInt("ggml.graph.nodes.computed", int64(len(g.Nodes)))
	}
	a.PutStr("ggml.backend", "CPU")
	a.PutInt("ggml.threads", int64(g.NThreads))
	a.PutInt("thread.id", int64(g.TID))
	if g.CPU.Known {
		a.PutInt("ggml.graph.on_cpu_ns", int64(g.CPU.Run))
		a.PutInt("ggml.graph.runqueue_ns", int64(g.CPU.Wait))
		a.PutDouble("ggml.graph.on_cpu_share", min(float64(g.CPU.Run)/float64(max(g.End-g.Start, 1))/float64(g.NThreads), 1))
		if g.CPU.Perturbed {
			a.PutBool("ggml.graph.on_cpu_perturbed", true)
		}
	}
	if !s.Nodes || len(g.Nodes) == 0 {
		return sp
	}
	d := dag.Of(g.Nodes)
	a.PutInt("ggml.critical_path.duration_ns", int64(d.Duration))
	a.PutDouble("ggml.critical_path.share", float64(d.Duration)/float64(max(g.End-g.Start, 1)))
	a.PutInt("ggml.critical_path.nodes", int64(len(d.Critical)))
	ids := make([]pcommon.SpanID, len(g.Nodes))
	critical := d.Critical
	spans.EnsureCapacity(spans.Len() + len(g.Nodes))
	for i, n := range g.Nodes {
		ns := spans.AppendEmpty()
		s.node(ns, trace, sp.SpanID(), n, g)
		ids[i] = ns.SpanID()
		// Each node links to the nodes it read the results of: the graph's edges.
		ns.Links().EnsureCapacity(len(d.Producers[i]))
		for _, p := range d.Producers[i] {
			l := ns.Links().AppendEmpty()
			l.SetTraceID(trace)
			l.SetSpanID(ids[p])
		}
		if len(critical) > 0 && critical[0] == i {
			ns.Attributes().PutBool("ggml.critical_path", true)
			critical = critical[1:]
		}
	}
	return sp
}

// nodeAttrs is about how many attributes a node span gets with the roofline on, so that
// the map is allocated once: at full tracing the collector builds thousands a second.
const nodeAttrs = 20

func (s *Spans) node(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, n *assemble.Node, g *assemble.Graph) {
	threads := g.NThreads
	s.begin(sp, trace, parent, "ggml.node", n.Start, n.End) // renamed by op below
	a := sp.Attributes()
	a.EnsureCapacity(nodeAttrs)
	a.PutInt("ggml.threads", int64(threads))
	if len(n.Threads) == threads { // every thread's share was seen: the barrier probe is on
		busy := a.PutEmptySlice("ggml.thread.busy_ns")
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
		a.PutInt("ggml.barrier.wait_ns", int64(BarrierWait(n)))
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
		a.PutInt("ggml.moe.experts_used", int64(r.Used))
		a.PutInt("ggml.moe.tokens", int64(r.Tokens))
		ex := a.PutEmptySlice("ggml.moe.experts")
		ex.EnsureCapacity(len(r.Experts))
		for _, e := range r.Experts {
			ex.AppendEmpty().SetInt(int64(e))
		}
	}
	if info.FLOPs == 0 {
		return
	}
	a.PutDouble("ggml.flops", info.FLOPs)
	a.PutDouble("ggml.bytes", info.Bytes)
	if s.Peaks == (roofline.Peaks{}) {
		return
	}
	c := classify(n, g, s.Peaks)
	a.PutStr("ggml.roofline.bound", string(c.Bound))
	a.PutDouble("ggml.roofline.peak_fraction", c.Fraction)
	a.PutDouble("ggml.roofline.flops_per_second", c.FLOPS)
	a.PutDouble("ggml.roofline.bytes_per_second", c.Bandwidth)
}

// putNodeInfo puts what a node's description says: its op, tensor, layer and sources.
func putNodeInfo(a pcommon.Map, info *assemble.NodeInfo) {
	a.PutStr("ggml.op", info.Op)
	a.PutStr("ggml.tensor.name", info.Name)
	a.PutStr("ggml.tensor.type", info.Type)
	if w := WeightType(info); w != "" {
		a.PutStr("ggml.weight.type", w)
	}
	shape := a.PutEmptySlice("ggml.tensor.shape")
	shape.EnsureCapacity(len(info.Shape))
	for _, d := range info.Shape {
		shape.AppendEmpty().SetInt(d)
	}
	if l := Layer(info.Name); l >= 0 {
		a.PutInt("ggml.layer", int64(l))
	}
	if len(info.Srcs) > 0 {
		srcs := a.PutEmptySlice("ggml.src")
		srcs.EnsureCapacity(len(info.Srcs))
		for _, src := range info.Srcs {
			srcs.AppendEmpty().SetStr(src.Text)
		}
	}
	if info.FusedOp != "" {
		a.PutStr("ggml.fused.op", info.FusedOp)
	}
}

// classify places a node of g under the roofline of peaks, unless g's process's threads
// lacked a CPU over its latest graphs (GraphCPU.Starved): then its wall time is no measure
// of the kernel, and it is starved. Its achieved rates stay what they were.
func classify(n *assemble.Node, g *assemble.Graph, peaks roofline.Peaks) roofline.Class {
	c := roofline.Classify(n.Info.FLOPs, n.Info.Bytes, float64(n.End-n.Start)/1e9, peaks)
	if g.CPU.Starved {
		c.Bound = roofline.Starved
	}
	return c
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
		{"ggml.sched.off_cpu_ns", s.OffCPU},
		{"ggml.sched.runqueue_ns", s.RunQueue},
		{"ggml.sched.preemptions", uint64(s.Preemptions)},
		{"ggml.sched.migrations", uint64(s.Migrations)},
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
