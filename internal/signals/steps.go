package signals

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/schema"
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
	s.begin(sp, trace, parent, schema.SpanDecode, d.Start, d.End)
	a := sp.Attributes()
	a.EnsureCapacity(decodeAttrs)
	a.PutInt(schema.LlamaBatchTokens, int64(d.Tokens))
	mix := d.Mixed()
	a.PutStr(schema.LlamaPhase, mix.Phase())
	a.PutInt(schema.LlamaDecodeResult, int64(d.Result))
	a.PutInt(schema.ThreadID, int64(d.TID))
	putBatch(a, &d.Batch)
	putMix(a, &mix)
	putSettings(a, &d.Settings)
	putCut(a, d.Cut)
	if d.Result != 0 {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("llama_decode returned " + strconv.Itoa(d.Result))
	}
}

// putSettings puts a decode's llama_context settings on its span, those read: a
// process may make a context per test (llama-bench), so the resource's are not its.
func putSettings(a pcommon.Map, c *ggml.Params) {
	put := func(key string, v int) {
		if v > 0 {
			a.PutInt(key, int64(v))
		}
	}
	// Not its threads: llama_set_n_threads changes them after the context was read (llama-
	// bench sets each test's after making its context), and the graphs carry the threads
	// they were computed with.
	put(schema.LlamaContextSize, c.Size)
	put(schema.LlamaContextBatchSize, c.Batch)
	put(schema.LlamaContextUbatchSize, c.Ubatch)
	put(schema.LlamaContextSeqSize, c.SeqSize)
	put(schema.LlamaContextSequences, c.Seqs)
}

// compute makes sp the span of a scheduler's computation of a graph, as the process's
// runtime named it (whisper.encode, ollama.forward, …).
func (s *Spans) compute(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, d *assemble.Step) {
	name := d.Name
	if name == "" {
		name = schema.SpanSchedCompute // the runtime gives it none
	}
	s.begin(sp, trace, parent, name, d.Start, d.End)
	a := sp.Attributes()
	a.EnsureCapacity(decodeAttrs)
	a.PutStr(schema.GGMLPhase, d.Phase)
	if d.Stage != "" {
		a.PutStr(schema.GGMLStepStage, d.Stage)
	}
	if d.Tokens > 0 {
		a.PutInt(schema.GGMLStepTokens, int64(d.Tokens))
	}
	if h := d.Head; h != nil {
		a.PutInt(schema.GGMLGraphNodes, int64(h.Nodes))
		a.PutInt(schema.GGMLSchedBackends, int64(h.Backends))
		if h.First != nil && name == schema.SpanSchedCompute { // what tells it apart, for a runtime profinfer does not know
			a.PutStr(schema.GGMLStepFirstNode, h.First.Op+" "+h.First.Name)
		}
	}
	a.PutInt(schema.ThreadID, int64(d.TID))
	putCut(a, d.Cut)
	if d.Result != 0 {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(name + " returned " + strconv.Itoa(d.Result))
	}
}

// putCut marks a step or graph the process ended inside.
func putCut(a pcommon.Map, cut bool) {
	if cut {
		a.PutBool(schema.ProfinferCut, true)
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
	sp.SetName(schema.SpanTranscription)
	sp.SetStartTimestamp(s.Clock.Time(j.Start))
	sp.SetEndTimestamp(s.Clock.Time(j.End))
	a := sp.Attributes()
	audio := float64(j.Samples) / SampleRate
	a.PutDouble(schema.WhisperAudioSeconds, audio)
	if audio > 0 {
		a.PutDouble(schema.WhisperRealTimeFactor, float64(j.End-j.Start)/1e9/audio)
	}
	for _, ph := range [...]struct{ phase, passes, seconds string }{
		{"encode", schema.WhisperEncodePasses, schema.WhisperEncodeSeconds},
		{"decode", schema.WhisperDecodePasses, schema.WhisperDecodeSeconds},
	} {
		a.PutInt(ph.passes, int64(j.Phases[ph.phase].Steps))
		a.PutDouble(ph.seconds, float64(j.Phases[ph.phase].NS)/1e9)
	}
	a.PutInt(schema.ThreadID, int64(j.TID))
	if j.Dropped {
		a.PutBool(schema.ProfinferRecordsLost, true)
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
	s.begin(sp, trace, parent, schema.SpanSplit, sl.Start, sl.End)
	a := sp.Attributes()
	a.EnsureCapacity(3)
	a.PutStr(schema.GGMLBackend, sl.Backend)
	a.PutInt(schema.GGMLGraphNodes, int64(sl.NNodes))
	a.PutInt(schema.ThreadID, int64(sl.TID))
	return sp.SpanID()
}

// device is a device's work on a split: from its handing over to the end of the CPU's
// wait that saw it done, a bound on when it ended (ggml.device.end_bound) unless the CPU
// was waiting then. Its nodes are events, at the handing over: those the device timed
// itself where it did, else those read from its graph, untimed.
func (s *Spans) device(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, sl *assemble.Split) {
	s.begin(sp, trace, parent, schema.SpanDevice, sl.Start, sl.Done)
	a := sp.Attributes()
	a.PutStr(schema.GGMLBackend, sl.Backend)
	a.PutInt(schema.GGMLGraphNodes, int64(sl.NNodes))
	a.PutInt(schema.GGMLDeviceWaitNS, int64(sl.Wait))
	a.PutBool(schema.GGMLDeviceEndBound, sl.Bound)
	a.PutInt(schema.ThreadID, int64(sl.TID))
	if len(sl.Timed) > 0 {
		s.timedNodes(sp, sl, len(sl.Nodes) > 0)
		return
	}
	if len(sl.Nodes) == 0 {
		return
	}
	a.PutInt(schema.GGMLGraphNodesDescribed, int64(len(sl.Nodes)))
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
	a.PutInt(schema.GGMLGraphNodesTimed, timed)
	a.PutInt(schema.GGMLDeviceTimedNS, sum)
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
		ev.Attributes().PutStr(schema.GGMLDeviceLabel, n.Label)
		if n.Known {
			ev.Attributes().PutInt(schema.GGMLDeviceNodeNS, int64(n.NS))
		}
	}
}

// putPhase gives sp, a span inside step d, the step's phase where d is a scheduler's
// computation: whisper's steps share their transcription's trace, which therefore does
// not tell a graph's phase, as a llama_decode's trace does.
func putPhase(sp ptrace.Span, d *assemble.Step) {
	if d.Kind == assemble.SchedCompute {
		sp.Attributes().PutStr(schema.GGMLPhase, d.Phase)
	}
}

func (s *Spans) copy(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, c *assemble.Copy) ptrace.Span {
	s.begin(sp, trace, parent, schema.SpanCopy, c.Start, c.End)
	a := sp.Attributes()
	a.PutStr(schema.GGMLBackendSource, c.Src)
	a.PutStr(schema.GGMLBackendDestination, c.Dst)
	a.PutStr(schema.GGMLTensorName, c.Tensor)
	a.PutInt(schema.GGMLCopyBytes, c.Bytes)
	if c.Queued {
		a.PutBool(schema.GGMLCopyQueued, true)
	}
	a.PutInt(schema.ThreadID, int64(c.TID))
	return sp
}
