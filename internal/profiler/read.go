package profiler

import (
	"errors"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/ringread"
)

// tick is how often the reader wakes on its own, to hand assembled spans to the pipeline.
// Each wakeup takes a context switch on the cores the model runs on, so it is rare.
const tick = time.Second

// readLoop drains the ring buffer into the assembler, and runs the commands others hand
// it between two records. It never blocks the BPF side: when it falls behind, the kernel
// drops records and counts them.
func (p *Profiler) readLoop() {
	defer p.wg.Done()
	defer close(p.readerDone)
	defer p.runCommands() // those handed over as it stopped
	in := p.in
	var (
		rec  ringbuf.Record
		ev   events.Event
		last = time.Now()
	)
	for {
		p.runCommands()
		err := p.reader.ReadInto(&rec, last.Add(tick))
		switch {
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case errors.Is(err, ringbuf.ErrFlushed):
			in.caughtUp()
			p.reap()
			select {
			case <-p.stop: // Shutdown flushed: everything submitted has been read
				return
			default:
			}
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringread.ErrWoken):
			in.caughtUp()
		case err != nil:
			p.log.Warn("reading the ring buffer", zap.Error(err))
		default:
			if derr := events.Parse(rec.RawSample, &ev); derr != nil {
				p.log.Debug("bad record", zap.Error(derr))
				break
			}
			in.tele.EventsReceived++
			in.read = max(in.read, ev.TS)
			in.dispatch(&ev)
			p.post()
			if in.pendingFull {
				in.handOver()
			}
		}
		if now := time.Now(); now.Sub(last) >= tick {
			in.sweepRequests()
			in.handOver()
			p.post()
			last = now
		}
	}
}

// dispatch feeds one event of a traced process to the assembler. A process's events
// read after it was reaped are dropped: they would make it state that nothing deletes.
func (in *ingest) dispatch(ev *events.Event) {
	tr := in.procs[int(ev.PID)]
	if tr == nil {
		return
	}
	a := in.asm
	switch ev.Kind {
	case events.DecodeEnter:
		in.decodesWith(tr, ev.Context())
		in.computes(tr)
		a.DecodeEnter(ev.PID, ev.TID, ev.TS, ev.Tokens(), ev.Context(), &ev.Batch)
	case events.DecodeExit:
		a.DecodeExit(ev.PID, ev.TID, ev.TS, ev.Result(), ev.Lost())
	case events.GraphEnter:
		in.computes(tr)
		tr.summed(ev.CPU)
		a.GraphEnter(ev.PID, ev.TID, ev.TS, ev.Graph(), ev.Nodes(), int(ev.Nth), ev.CPU)
	case events.GraphExit:
		tr.summed(ev.CPU)
		a.GraphExit(ev.PID, ev.TID, ev.TS, ev.Sched, ev.Lost(), ev.CPU)
	case events.Node:
		var info *assemble.NodeInfo
		if ev.Flags&events.FlagKnown != 0 {
			info = in.nodeInfo(tr, ev)
		}
		a.NodeStart(ev.PID, ev.TID, ev.TS, ev.TensorAddr(), ev.Fused(), int(ev.Ith), info, ev.Sched, in.counted(ev))
	case events.NodeDetail:
		a.NodeStart(ev.PID, ev.TID, ev.TS, ev.TensorAddr(), ev.Fused(), int(ev.Ith), in.nodeInfo(tr, ev), ev.Sched, in.counted(ev))
	case events.Experts:
		a.Experts(ev.PID, ev.TID, ev.IDs(), int(ev.Ith), ev.Rows, ev.RowBytes())
	case events.ThreadExit:
		a.ThreadExit(ev.PID, ev.TID, ev.TS, ev.Sched, in.counted(ev))
	case events.Barrier:
		a.Barrier(ev.PID, ev.TID, ev.TS)
	case events.ThreadStart:
		if in.counters {
			in.askCounters(threadStart, ev)
		}
	case events.SplitEnter:
		name := tr.backends.Name(ev.Backend())
		device := name != backends.CPU
		if device && !tr.device {
			tr.device = true
			in.effects = append(in.effects, effect{kind: deviceSeen, pid: int(ev.PID),
				module: tr.backends.Module(ev.Backend()), backend: name})
			// Known before the split's spans are made, though a short job has exited by
			// the time they are read.
			if name == backends.Vulkan && tr.software != "" {
				tr.proc.Software = tr.software
				in.log.Info("the device is a software driver, in the process's own threads", zap.Int("pid", int(ev.PID)),
					zap.String("backend", name), zap.String("driver", tr.software))
			}
		}
		a.SplitEnter(ev.PID, ev.TID, ev.TS, name, ev.BackendAddr(), ev.SplitNodes(), device)
	case events.ThreadName:
		if tr.software == "" {
			tr.software = backends.SoftwareThread(ev.Name())
		}
	case events.SchedNew:
		tr.reread = true
		tr.fresh = true
		in.schedMade(tr, ev.Backends())
	case events.SplitNode:
		a.SplitNode(ev.PID, ev.TID, int(ev.Ith), in.nodeInfo(tr, ev))
	case events.TimedNode:
		a.TimedNode(ev.PID, ev.TID, in.label(ev.Label), in.nodeInfo(tr, ev))
	case events.DeviceTimes:
		times := in.times[:ev.Nth]
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
		name, bytes := tr.describer.Copy(ev)
		src, dst := ev.Buffers()
		a.CopyEnter(ev.PID, ev.TS, assemble.Copy{TID: ev.TID, Src: tr.backends.Name(src), Dst: tr.backends.Name(dst),
			Tensor: name, Bytes: bytes, Queued: ev.Flags&events.FlagQueued != 0})
	case events.CopyExit:
		a.CopyExit(ev.PID, ev.TID, ev.TS, ev.Made())
	case events.SeqRm:
		seq, p0, p1 := ev.SeqRemoved()
		in.reqs.Remove(ev.PID, ev.TS, seq, p0, p1)
		a.SeqRemoved(ev.PID, seq, p0, p1)
	case events.Received:
		in.reqs.Arrive(ev.PID, requests.Conn{ID: ev.Conn(), Front: ev.Flags&events.FlagFront != 0}, ev.TS)
	case events.Replied:
		in.reqs.Reply(ev.PID, requests.Conn{ID: ev.Conn(), Front: ev.Flags&events.FlagFront != 0}, ev.TS)
	case events.StepEnter:
		if tr.runtime.Steps {
			if !tr.schedSeen {
				in.schedMade(tr, ev.StepBackends())
			}
			a.StepEnter(ev.PID, ev.TID, ev.TS, &assemble.Head{Graph: ev.StepGraph(), Sched: ev.StepSched(), Nodes: ev.StepNodes(),
				Backends: ev.StepBackends(), First: tr.describer.First(ev)})
		}
	case events.StepExit:
		a.StepExit(ev.PID, ev.TID, ev.TS, ev.Result(), ev.Lost())
	case events.JobEnter:
		if tr.whisper && ev.JobContext() != tr.ctx && ev.JobContext() != 0 {
			in.newContext(tr, ev.JobContext())
		}
		a.JobEnter(ev.PID, ev.TID, ev.TS, ev.Samples(), ev.JobContext())
	case events.JobExit:
		a.JobExit(ev.PID, ev.TID, ev.TS, ev.Result(), ev.Lost())
	}
}

// maxLabels bounds the device's op labels kept, each once: a graph has a few dozen.
const maxLabels = 4096

// label returns b as a string, the same one each time: labels come a node at a time,
// graph after graph.
func (in *ingest) label(b []byte) string {
	if l, ok := in.labels[string(b)]; ok {
		return l
	}
	if len(in.labels) >= maxLabels {
		clear(in.labels)
	}
	l := string(b)
	in.labels[l] = l
	return l
}

// maxAsked bounds the threads remembered as having had their counters asked for:
// bindings that start a thread pool per context leave many short-lived threads behind.
const maxAsked = 4096

// counted returns the counter values ev carries. A thread met without them has the
// controller open its counters: they count from its next event on.
func (in *ingest) counted(ev *events.Event) *events.Counters {
	if ev.Flags&events.FlagCounted != 0 {
		return &ev.Counters
	}
	if !in.counters || in.asked[ev.TID] {
		return nil
	}
	in.askCounters(countThread, ev)
	return nil
}

// askCounters has the controller open the counters of ev's thread.
func (in *ingest) askCounters(kind effectKind, ev *events.Event) {
	if len(in.asked) >= maxAsked { // tids are reused; forget the old ones
		clear(in.asked)
	}
	in.asked[ev.TID] = true
	in.effects = append(in.effects, effect{kind: kind, pid: int(ev.PID), tid: ev.TID})
}

// nodeInfo describes the node ev of process tr starts, and has the controller ask the
// process to send every node's detail again when a known node came without one.
func (in *ingest) nodeInfo(tr *inProc, ev *events.Event) *assemble.NodeInfo {
	info, again := tr.describer.Node(ev)
	if again {
		in.effects = append(in.effects, effect{kind: redescribe, pid: int(ev.PID)})
	}
	return info
}

// decodesWith notes the llama_context ctx a decode of t computes with. A context seen
// before is not looked at again, so that a process that alternates between two (a draft
// model's and its target's) costs nothing per switch; unless t made a scheduler since,
// as a new context may take a freed one's address, or a read is under way, which
// releases t's held decodes once t.ctx is still the context it read.
func (in *ingest) decodesWith(t *inProc, ctx uint64) {
	if ctx == 0 || ctx == t.ctx && !t.reread {
		return
	}
	if _, seen := t.contexts[ctx]; seen && !t.reread && !t.looking {
		t.ctx = ctx
		return
	}
	in.newContext(t, ctx)
}

// maxContexts bounds the contexts a process's record of those seen holds: a decode's
// context is its latest or one just before (a draft model's and its target's).
const maxContexts = 16

// newContext notes that process t decodes with llama_context ctx, new to profinfer. A
// context means a loaded model: the controller looks for the model file (and reads a
// whisper_context), and until it has, t's decodes wait, so that their spans name it.
// Once per context: per decode it would cost every token syscalls.
func (in *ingest) newContext(t *inProc, ctx uint64) {
	t.ctx = ctx
	t.reread = false
	t.looking = true
	if t.contexts == nil || len(t.contexts) >= maxContexts {
		t.contexts = map[uint64]struct{}{}
	}
	t.contexts[ctx] = struct{}{}
	in.effects = append(in.effects, effect{kind: contextSeen, pid: t.proc.PID, ctx: ctx})
}

// schedMade notes that process t made a backend scheduler with n backends: the
// controller decides its split probes.
func (in *ingest) schedMade(t *inProc, n int) {
	t.schedSeen = true
	in.effects = append(in.effects, effect{kind: schedMade, pid: t.proc.PID, n: n})
}

// computes notes that process t decodes or computes a graph: with no scheduler seen made
// (profinfer came after), its scheduler's backends are read at its next graph.
func (in *ingest) computes(t *inProc) {
	if !t.schedSeen && !t.schedRead {
		t.schedRead = true
		in.effects = append(in.effects, effect{kind: schedWanted, pid: t.proc.PID})
	}
}
