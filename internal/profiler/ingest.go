package profiler

import (
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/cpus"
	"github.com/profinfer/profinfer/internal/describe"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/runtimes"
	"github.com/profinfer/profinfer/internal/signals"
	"github.com/profinfer/profinfer/internal/window"
)

// ingest is what the reader owns: the events' way from the ring buffer to spans and
// metrics. Other goroutines reach it only through commands the reader runs (do, ask).
type ingest struct {
	cfg      *Config
	log      *zap.Logger
	traces   bool // spans are wanted
	counters bool // perf counters are read
	out      chan<- ptrace.Traces

	procs       map[int]*inProc
	asm         *assemble.Assembler
	spans       *signals.Spans
	acc         *signals.Metrics
	pending     ptrace.Traces
	pendingFull bool   // pending holds maxPending spans or more
	read        uint64 // every record stamped before it was read (CLOCK_MONOTONIC)
	seen        uint64 // decodes and loose graphs offered for spans, for span sampling
	traced      uint64 // graphs traced node by node
	tele        signals.Telemetry
	asked       map[uint32]bool // threads whose counters the controller was asked to open
	retiring    []retiring      // processes gone, to drop once the ring is drained
	reqs        *requests.Tracker
	ended       []*requests.Request       // scratch: requests just ended
	times       [events.TimesChunk]uint64 // scratch: a DeviceTimes record's times
	labels      map[string]string         // the device's op labels, interned (see label)
	effects     []effect                  // for the controller, handed over by post

	pause  time.Duration // the longest the reader spent on commands at once
	paused time.Duration // and in all
}

// inProc is a traced process as ingest knows it.
type inProc struct {
	proc        signals.Origin
	runtime     *runtimes.Runtime
	backends    *backends.Resolver
	describer   *describe.Describer
	whisper     bool       // whisper.cpp: its jobs carry their context
	ctx         uint64     // the llama_context (or whisper_context) of its latest decode
	device      bool       // a split ran on a backend other than the CPU: the device probes were asked for
	software    string     // the software driver whose device threads it runs: read at attach, or from the names its threads took since
	schedSeen   bool       // a backend scheduler was seen made
	fresh       bool       // one was seen made (SchedNew) and computed no graph yet: the next graph is its first
	schedRead   bool       // a read of its scheduler was asked for
	quotaWarned bool       // a failure to read its cgroup CPU quota was logged
	cpus        cpus.Count // the CPUs it may run on, as last read
	front       int        // the process whose connections are followed as its own (runtimes.Front), or 0
	// reread says that it made a scheduler since: a new llama_context, which may have
	// the address of one freed before, so its next decode's context is read again.
	reread bool
	// contexts are those the controller was told of (newContext); past maxContexts, all
	// are forgotten but the latest.
	contexts map[uint64]struct{}
	// ctxFields says where its llama_context keeps the settings each decode sends: nil
	// where its release has no getters to tell.
	ctxFields    *ggml.Context
	params       ggml.Params // its latest decode's context's, logged as they change
	paramsWarned bool        // a decode's settings that did not parse were logged
	// looking says that the controller reads its new context (newContext); held are its
	// decodes that wait for it.
	looking  bool
	held     []*assemble.Step
	heldJobs []*assemble.Job // jobs that ended while their steps were held, exported after them
	// phases are what the controller was told of each phase's windows (notePhases).
	phases map[window.Phase]uint8
	// traced is when it was marked traced (CLOCK_MONOTONIC ns); graphs and steps count
	// the CPU graphs and the finished steps delivered since, for its end.
	traced, graphs, steps uint64
	// allowed are the CPUs it may run on, as last read; idleAt how idle the machine's
	// CPUs had sat at the last reading, graphsAtIdle its graphs then.
	allowed      []int
	idleAt       cpus.Idle
	graphsAtIdle uint64
	// ran is the process's CPU time (ns) as its graphs' probes last summed it, ranAtIdle
	// as at the last reading of idleAt: what it took of its CPUs between readings, the
	// rest being idle or other processes'.
	ran, ranAtIdle uint64
}

func newIngest(cfg *Config, log *zap.Logger, traces, counters bool, out chan<- ptrace.Traces, spans *signals.Spans, acc *signals.Metrics) *ingest {
	in := &ingest{cfg: cfg, log: log, traces: traces, counters: counters, out: out, procs: map[int]*inProc{},
		spans: spans, acc: acc, pending: ptrace.NewTraces(), asked: map[uint32]bool{},
		reqs: requests.New(uint64(requestIdle)), labels: map[string]string{}}
	in.asm = assemble.New(sink{in})
	return in
}

// do has the reader run f between two records, and says whether it will: not once the
// reader has returned. The reader is woken for it.
func (p *Profiler) do(f func(*ingest)) bool {
	select {
	case p.cmds <- f:
		_ = p.reader.Wake()
		return true
	case <-p.readerDone:
		return false
	}
}

// ask runs f on the reader and waits for it; false if the reader returned first.
func (p *Profiler) ask(f func(*ingest)) bool {
	done := make(chan struct{})
	if !p.do(func(in *ingest) { f(in); close(done) }) {
		return false
	}
	select {
	case <-done:
		return true
	case <-p.readerDone:
		return false
	}
}

// runCommands runs the commands waiting for the reader. Commands are rare, and a channel
// read that finds none takes no lock: the reader looks before every record.
func (p *Profiler) runCommands() {
	select {
	case f := <-p.cmds:
		start := time.Now()
		f(p.in)
		for more := true; more; {
			select {
			case f := <-p.cmds:
				f(p.in)
			default:
				more = false
			}
		}
		d := time.Since(start)
		p.in.pause, p.in.paused = max(p.in.pause, d), p.in.paused+d
	default:
	}
}

// post hands the effects the reader noted to the controller if it can take them now;
// else they wait for the reader's next record or tick. The reader never waits on it.
func (p *Profiler) post() {
	in := p.in
	if len(in.effects) == 0 {
		return
	}
	select {
	case p.effects <- in.effects:
		in.effects = nil
	default:
	}
}

// readerStats returns the reader's longest pause on commands and their sum, the most
// bytes the ring held at a read, and the graphs traced node by node.
func (p *Profiler) readerStats() (pause, paused time.Duration, high int, traced uint64) {
	p.ask(func(in *ingest) { pause, paused, high, traced = in.pause, in.paused, p.reader.HighWater(), in.traced })
	return
}
