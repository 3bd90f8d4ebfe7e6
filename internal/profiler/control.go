package profiler

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/runtimes"
	"github.com/profinfer/profinfer/internal/window"
)

// controller is what the controller goroutine owns: the probes attached to each traced
// process, their sampling windows, and the search for their model files. The registry
// reaches it through call; the reader through effects.
type controller struct {
	procs   map[int]*ctlProc
	pool    *probe.Pool // the lasting probes, placed once per file; safe for any goroutine
	windows *window.Scheduler
	search  time.Time // when to look for model files next; zero: none is missing
	// conns is the connections layer, attached while a process is traced: it costs
	// every socket call of the machine (every syscall, before Linux 6.5).
	conns      probe.Links
	connsError bool // a failure to attach it was logged
}

// ctlProc is a traced process as the controller knows it.
type ctlProc struct {
	pid        int
	attachment *probe.Attachment
	runtime    *runtimes.Runtime
	args       []string // its command line
	parent     string   // the executable of the process that started it
	// Where its whisper_context holds its model (or nil).
	whisper    *runtimes.WhisperFields
	warned     bool   // a failure to attach the node probes was logged
	schedSeen  bool   // a backend scheduler was seen made: its backends decided the split probes
	schedAsked bool   // its scheduler's read (AttachSchedRead) was placed, and is not done
	multi      bool   // a scheduler with a backend besides the CPU's was seen made
	splits     bool   // the split probes are attached
	model      bool   // its model file was found
	noModel    bool   // it has none to look for, or it could not be read
	modelVSize uint64 // its virtual size when no model was found: look again once it grows
}

// effectKind is what the reader asks of the controller.
type effectKind uint8

const (
	filled        effectKind = iota // a sampling window's last graph was assembled: close it
	redescribe                      // a known node came undescribed: have every detail sent again
	contextSeen                     // a process decodes with a new context (ctx): read it
	countThread                     // a thread came without counters: open them
	threadStart                     // a thread started: open its counters
	deviceSeen                      // a process computed a split on a backend other than the CPU
	schedWanted                     // a process computes with a scheduler made before profinfer came: read it
	schedMade                       // a process made a scheduler of n backends, or it was read
	phaseTraced                     // a window traced a graph of phase
	phaseUntraced                   // a graph of phase, no window's, came
	gone                            // the reader dropped a process
)

type effect struct {
	kind    effectKind
	pid     int
	tid     uint32           // countThread, threadStart
	n       int              // schedMade
	ctx     uint64           // contextSeen
	module  *discover.Module // deviceSeen: the backend's library
	backend string           // deviceSeen
	phase   window.Phase     // phaseTraced, phaseUntraced
}

// call runs f on the controller and waits for it; false once Shutdown began.
func (p *Profiler) call(f func()) bool {
	done := make(chan struct{})
	select {
	case p.calls <- func() { f(); close(done) }:
		<-done
		return true
	case <-p.stop:
		return false
	}
}

// controlLoop acts on the reader's effects and the registry's calls as they come, opens
// the sampling windows that are due, and every modelSearch, while some process has no
// model file yet, looks for it. It has no timer of its own otherwise: each wakeup of the
// collector costs the model on its cores.
func (p *Profiler) controlLoop() {
	defer p.wg.Done()
	c := p.ctl
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var effects []effect
		select {
		case <-p.stop:
			return
		case effects = <-p.effects:
		case f := <-p.calls:
			f()
		case <-timer.C:
		}
		var threads []effect
		for _, e := range effects {
			switch e.kind {
			case countThread, threadStart:
				threads = append(threads, e)
			case contextSeen:
				p.readContext(e.pid, e.ctx) // at once: the process may free it soon
			default:
				p.act(e)
			}
		}
		var window time.Time
		if p.cfg.sampled() {
			window = c.windows.Tick()
		}
		p.openCounters(threads)
		next := p.searchModels()
		if !window.IsZero() && (next.IsZero() || window.Before(next)) {
			next = window
		}
		p.publish()
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		}
	}
}

// act does what effect e asks about a traced process.
func (p *Profiler) act(e effect) {
	c := p.ctl
	t := c.procs[e.pid]
	if t == nil {
		return
	}
	switch e.kind {
	case filled:
		c.windows.Filled(e.pid)
	case redescribe:
		if err := probe.Remember(&p.bpf.ProfinferMaps, e.pid, monotonic()); err != nil {
			p.log.Debug("node details not asked again", zap.Int("pid", e.pid), zap.Error(err))
		}
	case deviceSeen:
		p.attachDevice(t, func(a *probe.Attachment) error { return a.AttachDevice(e.module, e.backend) })
	case schedWanted, schedMade:
		p.backendProbes(t, e)
	case phaseTraced:
		c.windows.Traced(e.pid, e.phase)
	case phaseUntraced:
		if c.windows.Untraced(e.pid, e.phase) {
			p.log.Debug("sampling window brought forward", zap.Int("pid", e.pid), zap.String("phase", e.phase.Name), zap.String("backend", e.phase.Backend))
		}
	case gone:
		delete(c.procs, e.pid)
		if len(c.procs) == 0 && c.conns != nil {
			p.closeLater(c.conns)
			c.conns = nil
		}
		c.windows.Remove(e.pid)
		p.closeLater(t.attachment)
		p.sweepPool()
	}
}

// followConnections attaches the connections layer, if it is on and not attached: on the
// controller, as a process is traced.
func (p *Profiler) followConnections() {
	c := p.ctl
	if c.conns != nil || !p.cfg.Layers.Connections || !p.cfg.Layers.Application {
		return
	}
	l, err := p.bpf.AttachConnections()
	if err != nil {
		if !c.connsError {
			p.log.Warn("the connections layer not attached: requests have no wait before their first decode", zap.Error(err))
			c.connsError = true
		}
		return
	}
	c.conns = l
}

// shown is what the controller last published for the metrics.
type shown struct {
	probes int
	next   map[int]time.Time // when each process's next sampling window opens; zero while one is open
}

// publish counts the probes attached, and when windows open, for the metrics.
func (p *Profiler) publish() {
	c := p.ctl
	s := &shown{next: make(map[int]time.Time, len(c.procs))}
	for pid, t := range c.procs {
		s.probes += t.attachment.Probes()
		s.next[pid] = c.windows.NextOf(pid)
	}
	p.shown.Store(s)
}

// attachDevice has attach add device probes to a process, and says what changed.
func (p *Profiler) attachDevice(t *ctlProc, attach func(*probe.Attachment) error) {
	was := t.attachment.Logger
	err := attach(t.attachment)
	if err != nil && !p.reg.Vanished(t.pid) {
		p.log.Warn("some device probes not attached", zap.Int("pid", t.pid), zap.Error(err))
	}
	if t.attachment.Logger == was {
		return
	}
	switch t.attachment.Logger {
	case probe.LoggerNodes:
		p.log.Info("ggml-vulkan's perf logger is on: reading the device's own time for each node", zap.Int("pid", t.pid))
	case probe.LoggerConcurrent:
		p.log.Info("ggml-vulkan's perf logger times groups of nodes (GGML_VK_PERF_LOGGER_CONCURRENT): "+
			"node times are not read; unset it for a time per node", zap.Int("pid", t.pid))
	}
}

// backendProbes adds or removes the split probes and the scheduler's read. Where the CPU
// is a scheduler's only backend the split probes go (or stay off), each CPU graph
// standing for its split: they would cost every token two probe hits, one a return
// probe's. With no scheduler seen made (profinfer came after), the scheduler is read at
// the process's next graph; where it cannot be, the split probes are needed.
func (p *Profiler) backendProbes(t *ctlProc, e effect) {
	var gone probe.Links
	switch {
	case e.kind == schedWanted:
		t.schedAsked = true
		ok, err := t.attachment.AttachSchedRead()
		if ok || t.schedSeen {
			break
		}
		p.log.Debug("scheduler not read", zap.Int("pid", t.pid), zap.Error(err))
		p.attachSplits(t)
	default: // schedMade
		t.schedSeen = true
		if t.schedAsked { // its read is done
			t.schedAsked = false
			gone = t.attachment.DetachSchedRead()
		}
		switch {
		case e.n > 1:
			t.multi = true
			p.attachSplits(t)
		case t.multi: // an earlier scheduler has another backend
		case t.splits:
			t.splits = false
			gone = append(gone, t.attachment.DetachSplits()...)
		}
	}
	if len(gone) > 0 {
		p.closeLater(gone)
	}
}

func (p *Profiler) attachSplits(t *ctlProc) {
	if t.splits {
		return
	}
	t.splits = true
	if err := t.attachment.AttachSplits(); err != nil && !p.reg.Vanished(t.pid) {
		p.log.Warn("split probes not attached", zap.Int("pid", t.pid), zap.Error(err))
	}
}

// openCounters opens the perf counters of threads that came without, or just started.
// Only the controller opens and closes them.
func (p *Profiler) openCounters(threads []effect) {
	open := func(e effect) error {
		switch {
		case e.kind == threadStart:
			return p.counters.Started(uint32(e.pid), e.tid)
		case !p.counters.Has(e.tid):
			return p.counters.Open(uint32(e.pid), e.tid)
		}
		return nil
	}
	swept := false
	for _, e := range threads {
		err := open(e)
		if errors.Is(err, perfcount.ErrFull) && !swept {
			// Threads that exited keep their slots until a sweep: a build without
			// OpenMP starts its workers anew for every graph. Once a batch: a sweep
			// that freed nothing would free nothing for the next thread either.
			p.sweepCounters()
			swept = true
			err = open(e)
		}
		if err != nil {
			if errors.Is(err, unix.ESRCH) { // a short-lived thread, gone before the reader met it
				p.log.Debug("perf counters not opened on a thread", zap.Error(err))
			} else {
				p.log.Warn("perf counters not opened on a thread", zap.Error(err))
			}
		}
	}
}

// sweepCounters closes the perf counters of threads that are gone, and has the reader ask
// for them again should their tids come back.
func (p *Profiler) sweepCounters() {
	var closed []uint32
	err := p.counters.Sweep(func(pid, tid uint32) bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, tid))
		keep := p.ctl.procs[int(pid)] != nil && err == nil
		if !keep {
			closed = append(closed, tid)
		}
		return keep
	})
	if err != nil {
		p.log.Debug("closing perf counters", zap.Error(err))
	}
	if len(closed) > 0 {
		p.do(func(in *ingest) {
			for _, tid := range closed {
				delete(in.asked, tid)
			}
		})
	}
}

// sweepPool removes the files' probes that no process held for probe.Linger: a file's
// probes stay for the next process that maps it, for a while, and go as another process
// exits, at discovery's next scan of /proc, or with the collector.
func (p *Profiler) sweepPool() {
	if idle := p.ctl.pool.Sweep(time.Now()); len(idle) > 0 {
		p.closeLater(idle)
	}
}

// closeLater closes probes on a goroutine of their own: removing a uprobe waits for the
// kernel's grace periods, about 0.1 s a probe here, and the controller must not stall on
// it. Until then the probes still fire.
func (p *Profiler) closeLater(c io.Closer) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := c.Close(); err != nil {
			p.log.Debug("closing probes", zap.Error(err))
		}
	}()
}
