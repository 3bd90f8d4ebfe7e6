package profiler

import (
	"errors"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/requests"
)

// tick is how often the reader wakes on its own, to hand assembled spans to the pipeline.
// Each wakeup takes a context switch on the cores the model runs on, so it is rare.
const tick = time.Second

// readLoop drains the ring buffer into the assembler. It never blocks the BPF side: when
// it falls behind, the kernel drops records and counts them.
func (p *Profiler) readLoop() {
	defer p.wg.Done()
	var (
		rec  ringbuf.Record
		ev   events.Event
		last = time.Now()
	)
	for {
		err := p.reader.ReadInto(&rec, last.Add(tick))
		switch {
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case errors.Is(err, ringbuf.ErrFlushed):
			p.reap()
			select {
			case <-p.stop: // Shutdown flushed: everything submitted has been read
				return
			default:
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
		case err != nil:
			p.log.Warn("reading the ring buffer", zap.Error(err))
		default:
			if derr := events.Decode(rec.RawSample, &ev); derr != nil {
				p.log.Debug("bad record", zap.Error(derr))
				break
			}
			p.mu.Lock()
			p.tele.EventsReceived++
			p.dispatch(&ev)
			p.signal()
			full := p.pendingFull
			p.mu.Unlock()
			if full {
				p.flush(false)
			}
		}
		if now := time.Now(); now.Sub(last) >= tick {
			p.mu.Lock()
			p.sweepRequests()
			p.mu.Unlock()
			p.flush(false)
			last = now
		}
	}
}

// dispatch feeds one event to the assembler. Called with p.mu held.
func (p *Profiler) dispatch(ev *events.Event) {
	a := p.asm
	switch ev.Kind {
	case events.DecodeEnter:
		if tr := p.tracked[int(ev.PID)]; tr != nil {
			if ev.Context() != tr.ctx && ev.Context() != 0 {
				p.newContext(tr, ev.Context())
			}
			p.computes(tr)
		}
		a.DecodeEnter(ev.PID, ev.TID, ev.TS, ev.Tokens(), ev.Context(), &ev.Batch)
	case events.DecodeExit:
		a.DecodeExit(ev.PID, ev.TID, ev.TS, ev.Result(), ev.Lost())
	case events.GraphEnter:
		if tr := p.tracked[int(ev.PID)]; tr != nil {
			p.computes(tr)
		}
		a.GraphEnter(ev.PID, ev.TID, ev.TS, ev.Graph(), ev.Nodes(), int(ev.Nth), ev.CPU)
	case events.GraphExit:
		a.GraphExit(ev.PID, ev.TID, ev.TS, ev.Sched, ev.Lost(), ev.CPU)
	case events.Node:
		var info *assemble.NodeInfo
		if ev.Flags&events.FlagKnown != 0 {
			info = p.nodeInfo(ev)
		}
		a.NodeStart(ev.PID, ev.TID, ev.TS, ev.TensorAddr(), ev.Fused(), int(ev.Ith), info, ev.Sched, p.counted(ev))
	case events.NodeDetail:
		a.NodeStart(ev.PID, ev.TID, ev.TS, ev.TensorAddr(), ev.Fused(), int(ev.Ith), p.nodeInfo(ev), ev.Sched, p.counted(ev))
	case events.Experts:
		a.Experts(ev.PID, ev.TID, ev.IDs(), int(ev.Ith), ev.Rows, ev.RowBytes())
	case events.ThreadExit:
		a.ThreadExit(ev.PID, ev.TID, ev.TS, ev.Sched, p.counted(ev))
	case events.Barrier:
		a.Barrier(ev.PID, ev.TID, ev.TS)
	case events.ThreadStart:
		if p.counters != nil {
			p.askCounters(threadStart, ev)
		}
	case events.SplitEnter:
		if tr := p.tracked[int(ev.PID)]; tr != nil {
			name := tr.backends.Name(ev.Backend())
			device := name != backends.CPU
			if device && !tr.device {
				tr.device = true
				p.effects = append(p.effects, effect{kind: deviceSeen, pid: int(ev.PID), addr: ev.Backend()})
			}
			a.SplitEnter(ev.PID, ev.TID, ev.TS, name, ev.BackendAddr(), ev.SplitNodes(), device)
		}
	case events.SchedNew:
		if tr := p.tracked[int(ev.PID)]; tr != nil {
			p.schedMade(tr, ev.Backends())
		}
	case events.SplitNode:
		a.SplitNode(ev.PID, ev.TID, int(ev.Ith), p.nodeInfo(ev))
	case events.TimedNode:
		a.TimedNode(ev.PID, ev.TID, p.label(ev.Label), p.nodeInfo(ev))
	case events.DeviceTimes:
		times := p.times[:ev.Nth]
		for i := range times {
			times[i] = ev.DeviceTime(i)
		}
		a.DeviceTimes(ev.PID, ev.TID, ev.Label, ev.Held(), ev.First(), times)
	case events.SplitExit:
		a.SplitExit(ev.PID, ev.TID, ev.TS)
	case events.SyncEnter:
		a.SyncEnter(ev.PID, ev.TID, ev.TS, ev.BackendAddr())
	case events.SyncExit:
		a.SyncExit(ev.PID, ev.TID, ev.TS)
	case events.Copy:
		if tr := p.tracked[int(ev.PID)]; tr != nil {
			name, bytes := tr.describer.Copy(ev)
			src, dst := ev.Buffers()
			a.CopyEnter(ev.PID, ev.TS, assemble.Copy{TID: ev.TID, Src: tr.backends.Name(src), Dst: tr.backends.Name(dst),
				Tensor: name, Bytes: bytes, Queued: ev.Flags&events.FlagQueued != 0})
		}
	case events.CopyExit:
		a.CopyExit(ev.PID, ev.TID, ev.TS, ev.Made())
	case events.SeqRm:
		seq, p0, p1 := ev.SeqRemoved()
		p.reqs.Remove(ev.PID, ev.TS, seq, p0, p1)
	case events.StepEnter:
		if tr := p.tracked[int(ev.PID)]; tr != nil && tr.runtime.Steps {
			if !tr.schedSeen {
				p.schedMade(tr, ev.StepBackends())
			}
			a.StepEnter(ev.PID, ev.TID, ev.TS, &assemble.Head{Graph: ev.StepGraph(), Sched: ev.StepSched(), Nodes: ev.StepNodes(),
				Backends: ev.StepBackends(), First: tr.describer.First(ev)})
		}
	case events.StepExit:
		a.StepExit(ev.PID, ev.TID, ev.TS, ev.Result(), ev.Lost())
	case events.JobEnter:
		if tr := p.tracked[int(ev.PID)]; tr != nil && tr.whisper != nil && ev.JobContext() != tr.ctx && ev.JobContext() != 0 {
			p.newContext(tr, ev.JobContext())
		}
		a.JobEnter(ev.PID, ev.TID, ev.TS, ev.Samples(), ev.JobContext())
	case events.JobExit:
		a.JobExit(ev.PID, ev.TID, ev.TS, ev.Result(), ev.Lost())
	}
}

// maxLabels bounds the device's op labels kept, each once: a graph has a few dozen.
const maxLabels = 4096

// label returns b as a string, the same one each time: labels come a node at a time,
// graph after graph. Called with p.mu held.
func (p *Profiler) label(b []byte) string {
	if l, ok := p.labels[string(b)]; ok {
		return l
	}
	if len(p.labels) >= maxLabels {
		clear(p.labels)
	}
	l := string(b)
	p.labels[l] = l
	return l
}

// maxAsked bounds the threads remembered as having had their counters asked for:
// bindings that start a thread pool per context leave many short-lived threads behind.
const maxAsked = 4096

// counted returns the counter values ev carries. A thread met without them has the
// controller open its counters: they count from its next event on. Called with p.mu held.
func (p *Profiler) counted(ev *events.Event) *events.Counters {
	if ev.Flags&events.FlagCounted != 0 {
		return &ev.Counters
	}
	if p.counters == nil || p.asked[ev.TID] {
		return nil
	}
	p.askCounters(countThread, ev)
	return nil
}

// askCounters has the controller open the counters of ev's thread. Called with p.mu held.
func (p *Profiler) askCounters(kind effectKind, ev *events.Event) {
	if len(p.asked) >= maxAsked { // tids are reused; forget the old ones
		clear(p.asked)
	}
	p.asked[ev.TID] = true
	p.effects = append(p.effects, effect{kind: kind, pid: int(ev.PID), tid: ev.TID})
}

// nodeInfo describes the node ev starts, and has the controller ask the process to send
// every node's detail again when a known node came without one. Called with p.mu held.
func (p *Profiler) nodeInfo(ev *events.Event) *assemble.NodeInfo {
	tr := p.tracked[int(ev.PID)]
	if tr == nil {
		return nil
	}
	info, again := tr.describer.Node(ev)
	if again {
		p.effects = append(p.effects, effect{kind: redescribe, pid: int(ev.PID)})
	}
	return info
}

// sink receives assembled decodes and graphs, under p.mu. Metrics count everything;
// spans are kept for every SampleEvery-th one.
type sink struct{ p *Profiler }

func (s sink) Step(d *assemble.Step) {
	tr := s.p.tracked[int(d.PID)]
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
		s.p.countTraced(tr, g)
	}
	s.p.notePhases(tr, d)
	if tr.looking && len(tr.held) < maxHeld {
		tr.held = append(tr.held, d) // exported once its lookups are done
		return
	}
	s.export(tr, d)
}

// export counts decode d of tr and builds its spans, if kept, then follows the requests
// it carried. A decode dropped for lost records counts for its requests alone.
func (s sink) export(tr *tracked, d *assemble.Step) {
	var link requests.Link
	if !d.Dropped {
		s.p.acc.Step(&tr.proc, d)
		if s.p.traces != nil && (len(d.Graphs) == 0 || s.keep()) { // graph-less decodes are cheap: keep them all
			link = s.p.spans.Step(s.p.pending, &tr.proc, d)
			s.pend()
		}
	}
	s.p.ended = s.p.reqs.Decode(d, link, s.p.ended[:0])
	for _, r := range s.p.ended {
		s.request(tr, r)
	}
}

// request counts a request of tr that ended, and builds its span.
func (s sink) request(tr *tracked, r *requests.Request) {
	s.p.acc.Request(&tr.proc, r)
	if s.p.traces != nil {
		s.p.spans.Request(s.p.pending, &tr.proc, r)
		s.pend()
	}
}

// sweepRequests ends the requests that are over by now: rewound since their last decode,
// or idle. Called with p.mu held.
func (p *Profiler) sweepRequests() {
	p.ended = p.reqs.Sweep(monotonic(), func(pid uint32) bool {
		tr := p.tracked[int(pid)]
		return tr != nil && !tr.looking && !p.asm.Decoding(pid)
	}, p.ended[:0])
	for _, r := range p.ended {
		if tr := p.tracked[int(r.PID)]; tr != nil {
			sink{p}.request(tr, r)
		}
	}
}

// Job builds the span of a job (whisper's transcription), after its steps'.
func (s sink) Job(j *assemble.Job) {
	tr := s.p.tracked[int(j.PID)]
	if tr == nil {
		return
	}
	if tr.looking && len(tr.held) < maxHeld {
		tr.heldJobs = append(tr.heldJobs, j) // after the steps held with it
		return
	}
	s.p.acc.Job(&tr.proc, j)
	if s.p.traces != nil {
		s.p.spans.Job(s.p.pending, &tr.proc, j)
		s.pend()
	}
}

func (s sink) Graph(g *assemble.Graph) {
	if tr := s.p.tracked[int(g.PID)]; tr != nil {
		s.p.countTraced(tr, g)
		s.p.acc.Graph(&tr.proc, g)
		if s.p.traces != nil && s.keep() {
			s.p.spans.Graph(s.p.pending, &tr.proc, g)
			s.pend()
		}
	}
}

// maxPending is how many spans the reader builds before it hands them to the pipeline
// without waiting for its tick. A second of full tracing is some 15 000 spans; building
// them all before exporting any grew the heap into fresh pages every second, and zeroing
// those pages was a fifth of the collector's CPU.
const maxPending = 2048

// pend notes whether the pending spans are due for the pipeline. Called with p.mu held.
func (s sink) pend() { s.p.pendingFull = s.p.pending.SpanCount() >= maxPending }

// keep counts one more decode or graph offered for spans, and says whether its spans are
// kept: every SampleEvery-th one. Called with p.mu held.
func (s sink) keep() bool {
	s.p.seen++
	return (s.p.seen-1)%uint64(s.p.cfg.SampleEvery) == 0
}

// flush hands the pending spans to the pipeline; final (at Shutdown) waits for room, as
// long as its context lasts.
func (p *Profiler) flush(final bool) {
	p.mu.Lock()
	if !final {
		p.handOver()
		p.mu.Unlock()
		return
	}
	td := p.pending
	p.pending = ptrace.NewTraces()
	p.pendingFull = false
	p.mu.Unlock()
	if td.SpanCount() == 0 {
		return
	}
	select {
	case p.out <- td:
	case <-p.exportCtx.Done():
	}
}

// handOver queues the pending spans for the exporting goroutine, or counts them dropped if
// the queue is full: it never blocks. Called with p.mu held.
func (p *Profiler) handOver() {
	td := p.pending
	if td.SpanCount() == 0 {
		return
	}
	p.pending = ptrace.NewTraces()
	p.pendingFull = false
	select {
	case p.out <- td:
	default:
		if p.tele.SpansDropped == 0 {
			p.log.Warn("the pipeline is not keeping up: spans dropped (see profinfer.spans.dropped)")
		}
		p.tele.SpansDropped += uint64(td.SpanCount())
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
