package profiler

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/requests"
)

// sink receives the assembler's steps, jobs and loose graphs, on the reader. Metrics
// count everything; spans are kept for every SampleEvery-th one.
type sink struct{ in *ingest }

func (s sink) Step(d *assemble.Step) {
	in := s.in
	tr := in.procs[int(d.PID)]
	if tr == nil {
		return
	}
	tr.runtime.NameStep(d)
	if j := d.Job; j != nil {
		if j.Phases == nil {
			j.Phases = map[string]assemble.JobPhase{}
		}
		ph := j.Phases[d.Phase]
		ph.Steps++
		ph.NS += d.End - d.Start
		j.Phases[d.Phase] = ph
	}
	for _, g := range d.Graphs {
		in.graphDone(tr, g)
	}
	if !d.Cut {
		tr.steps++
	}
	in.notePhases(tr, d)
	if tr.looking && len(tr.held) < maxHeld {
		tr.held = append(tr.held, d) // exported once its lookups are done
		return
	}
	s.export(tr, d)
}

// maxHeld bounds the decodes a process keeps waiting for its context's lookup; past it
// they are exported without.
const maxHeld = 256

// export follows the requests step d of tr carried, which tells what its sequences did
// (its Mix), then counts it and builds its spans, if kept. A step dropped for lost records
// counts for its requests alone; one the process ended inside for its own, as its
// requests ended with the process.
func (s sink) export(tr *inProc, d *assemble.Step) {
	in := s.in
	d.Settings = in.settings(tr, d)
	if d.Cut {
		in.reqs.Classify(d)
	} else {
		in.ended = in.reqs.Step(d, in.ended[:0])
	}
	if !d.Dropped {
		in.acc.Step(&tr.proc, d)
		// Graph-less steps are cheap, and the one a process ended in is its last word:
		// keep them all.
		if in.traces && (len(d.Graphs) == 0 || d.Cut || s.keep()) {
			in.reqs.Link(d, in.spans.Step(in.pending, &tr.proc, d))
			s.pend()
		}
	}
	if d.Cut {
		return
	}
	for _, r := range in.ended {
		s.request(tr, r)
	}
}

// settings parses the settings of decode d's llama_context from the bytes the decode
// sent, and gives t's resource the first context's: a resource that changed would start
// t's metrics anew. Zero where t's release does not tell where they lie, or the bytes
// are not a live context's.
func (in *ingest) settings(t *inProc, d *assemble.Step) ggml.Params {
	if t.ctxFields == nil || d.Kind != assemble.LlamaDecode {
		return ggml.Params{}
	}
	p, err := t.ctxFields.Parse(d.Batch.Context[:])
	if err != nil {
		if !t.paramsWarned {
			t.paramsWarned = true
			in.log.Debug("llama_context's settings not read", zap.Int("pid", t.proc.PID), zap.Error(err))
		}
		return ggml.Params{}
	}
	if t.proc.CtxSize == 0 {
		t.proc.CtxSize, t.proc.CtxThreads = p.Size, p.Threads
		t.proc.CtxBatch, t.proc.CtxUbatch = p.Batch, p.Ubatch
	}
	if p != t.params { // a new context, or new threads: rare
		t.params = p
		in.log.Info("context", zap.Int("pid", t.proc.PID), zap.Int("n_ctx", p.Size), zap.Int("n_threads", p.Threads),
			zap.Int("n_batch", p.Batch), zap.Int("n_ubatch", p.Ubatch))
	}
	return p
}

// request counts a request of tr that ended, and builds its span.
func (s sink) request(tr *inProc, r *requests.Request) {
	in := s.in
	in.acc.Request(&tr.proc, r)
	if in.traces {
		in.spans.Request(in.pending, &tr.proc, r)
		s.pend()
	}
}

// Job builds the span of a job (whisper's transcription), after its steps'.
func (s sink) Job(j *assemble.Job) {
	in := s.in
	tr := in.procs[int(j.PID)]
	if tr == nil {
		return
	}
	if tr.looking && len(tr.held)+len(tr.heldJobs) < maxHeld {
		tr.heldJobs = append(tr.heldJobs, j) // after the steps held with it
		return
	}
	in.acc.Job(&tr.proc, j)
	if in.traces {
		in.spans.Job(in.pending, &tr.proc, j)
		s.pend()
	}
}

func (s sink) Graph(g *assemble.Graph) {
	in := s.in
	if tr := in.procs[int(g.PID)]; tr != nil {
		in.graphDone(tr, g)
		in.acc.Graph(&tr.proc, g)
		if in.traces && s.keep() {
			in.spans.Graph(in.pending, &tr.proc, g)
			s.pend()
		}
	}
}

// maxPending is how many spans the reader builds before it hands them to the pipeline
// without waiting for its tick. A second of full tracing is some 15 000 spans; building
// them all before exporting any grew the heap into fresh pages every second, and zeroing
// those pages was a fifth of the collector's CPU.
const maxPending = 2048

// pend notes whether the pending spans are due for the pipeline.
func (s sink) pend() { s.in.pendingFull = s.in.pending.SpanCount() >= maxPending }

// keep counts one more decode or graph offered for spans, and says whether its spans are
// kept: every SampleEvery-th one.
func (s sink) keep() bool {
	s.in.seen++
	return (s.in.seen-1)%uint64(s.in.cfg.SampleEvery) == 0
}

// caughtUp notes that the ring held no record: every one stamped before now was read.
func (in *ingest) caughtUp() { in.read = monotonic() }

// sweepRequests ends the requests that are over by the time every record stamped before
// was read: rewound since their last decode, or idle. Not by the clock: most records wake
// no one, so the ring holds up to a tick of decodes when the reader wakes and sweeps.
func (in *ingest) sweepRequests() {
	in.ended = in.reqs.Sweep(in.read, func(pid uint32) bool {
		tr := in.procs[int(pid)]
		return tr != nil && !tr.looking && !in.asm.Decoding(pid)
	}, in.ended[:0])
	for _, r := range in.ended {
		if tr := in.procs[int(r.PID)]; tr != nil {
			sink{in}.request(tr, r)
		}
	}
}

// endRequests ends every request of t, for why.
func (in *ingest) endRequests(t *inProc, why requests.End) {
	in.ended = in.reqs.End(uint32(t.proc.PID), why, in.ended[:0])
	for _, r := range in.ended {
		sink{in}.request(t, r)
	}
}

// release exports the decodes t kept waiting for its context's lookup, once it is done.
func (in *ingest) release(t *inProc) {
	if t.looking {
		return
	}
	s := sink{in}
	for _, d := range t.held {
		s.export(t, d)
		if in.pendingFull {
			in.handOver()
		}
	}
	clear(t.held)
	t.held = t.held[:0]
	for _, j := range t.heldJobs {
		s.Job(j)
	}
	clear(t.heldJobs)
	t.heldJobs = t.heldJobs[:0]
}

// handOver queues the pending spans for the exporting goroutine, or counts them dropped if
// the queue is full: it never blocks.
func (in *ingest) handOver() {
	td := in.pending
	if td.SpanCount() == 0 {
		return
	}
	in.pending = ptrace.NewTraces()
	in.pendingFull = false
	select {
	case in.out <- td:
	default:
		if in.tele.SpansDropped == 0 {
			in.log.Warn("the pipeline is not keeping up: spans dropped (see profinfer.spans.dropped)")
		}
		in.tele.SpansDropped += uint64(td.SpanCount())
	}
}

// flush hands the last pending spans to the pipeline at Shutdown, the reader gone,
// waiting for room as long as its context lasts.
func (p *Profiler) flush() {
	in := p.in
	td := in.pending
	in.pending = ptrace.NewTraces()
	in.pendingFull = false
	if td.SpanCount() == 0 {
		return
	}
	select {
	case p.out <- td:
	case <-p.exportCtx.Done():
	}
}

// exportLoop hands the queued span batches to the pipeline until Shutdown closes the queue.
func (p *Profiler) exportLoop() {
	defer p.exported.Done()
	for td := range p.out {
		if err := p.traces.ConsumeTraces(p.exportCtx, td); err != nil {
			p.log.Warn("spans not accepted by the pipeline", zap.Error(err))
		}
	}
}
