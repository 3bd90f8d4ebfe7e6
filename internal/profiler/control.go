package profiler

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/probe"
)

// The reader only decodes, describes, assembles and builds spans. What it finds that
// needs acting on travels to the controller as effects, so that nothing below the reader
// calls back into it: the controller opens and closes sampling windows, has processes
// send their nodes' detail again, opens and closes perf counters, and reads new contexts
// and model files from /proc.

// effectKind is what the reader asks of the controller.
type effectKind uint8

const (
	filled         effectKind = iota // a sampling window's last graph was assembled: close it
	redescribe                       // a known node came undescribed: have every detail sent again
	contextSeen                      // a process decodes with a new llama_context: read it
	countThread                      // a thread came without counters: open them
	threadStart                      // a thread started: open its counters
	sweep                            // discovery scanned /proc: close the counters of threads gone, and idle file probes
	deviceSeen                       // a process computed a split on another backend than the CPU
	splitsWanted                     // a process's scheduler has a backend besides the CPU's, or is unknown
	splitsUnwanted                   // a process's scheduler has the CPU's backend alone
	schedWanted                      // a process computes with a scheduler made before profinfer came: read it
	schedRead                        // a process's scheduler was read
)

type effect struct {
	kind effectKind
	pid  int
	tid  uint32 // countThread, threadStart
	addr uint64 // deviceSeen: the backend's get_name
}

// signal wakes the controller if the reader posted effects. Called with p.mu held.
func (p *Profiler) signal() {
	if len(p.effects) > 0 {
		p.wakeController()
	}
}

// controlLoop acts on the reader's effects as they come, opens the sampling windows that
// are due, and every modelSearch, while some process has no model file yet, looks for it.
// It has no timer of its own otherwise: each wakeup of the collector costs the model on
// its cores.
func (p *Profiler) controlLoop() {
	defer p.wg.Done()
	sampled := p.cfg.Nodes.Mode == NodesSampled && p.cfg.Layers.Runtime
	timer := time.NewTimer(0)
	defer timer.Stop()
	var search time.Time // when to look for model files next; zero: none is missing
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-timer.C:
		}
		p.mu.Lock()
		effects := p.effects
		p.effects = nil
		var contexts []int
		var threads, devices []effect
		var backendOps []effect
		swept := false
		for _, e := range effects {
			switch e.kind {
			case filled:
				p.windows.Filled(e.pid)
			case redescribe:
				if err := probe.Remember(&p.bpf.ProfinferMaps, e.pid, monotonic()); err != nil {
					p.log.Debug("node details not asked again", zap.Int("pid", e.pid), zap.Error(err))
				}
			case contextSeen:
				contexts = append(contexts, e.pid)
			case countThread, threadStart:
				threads = append(threads, e)
			case sweep:
				swept = true
			case deviceSeen:
				devices = append(devices, e)
			case splitsWanted, splitsUnwanted, schedWanted, schedRead:
				backendOps = append(backendOps, e)
			}
		}
		var window time.Time
		if sampled {
			window = p.windows.Tick()
		}
		missing := p.modelsMissing()
		p.setBackendProbes(backendOps)
		p.attachDevices(devices)
		p.mu.Unlock()
		p.openCounters(threads)
		if swept {
			p.sweepCounters()
			p.sweepPool()
		}
		for _, pid := range contexts {
			p.readContext(pid)
		}
		now := time.Now()
		switch { // a model found just now by readContext makes one look in vain
		case !missing:
			search = time.Time{}
		case search.IsZero():
			search = now.Add(modelSearch)
		case !now.Before(search):
			p.findModels()
			search = now.Add(modelSearch)
		}
		next := search
		if !window.IsZero() && (next.IsZero() || window.Before(next)) {
			next = window
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		}
	}
}

// attachDevices adds the device probes to processes that computed a split on a backend
// other than the CPU. Called with p.mu held, as windows attach theirs.
func (p *Profiler) attachDevices(devices []effect) {
	for _, e := range devices {
		t := p.tracked[e.pid]
		if t == nil {
			continue
		}
		err := t.attachment.AttachDevice(t.backends.Module(e.addr), t.backends.Name(e.addr))
		if err != nil && !p.reg.Vanished(e.pid) {
			p.log.Warn("some device probes not attached", zap.Int("pid", e.pid), zap.Error(err))
		}
		switch t.attachment.Logger {
		case probe.LoggerNodes:
			p.log.Info("ggml-vulkan's perf logger is on: reading the device's own time for each node", zap.Int("pid", e.pid))
		case probe.LoggerConcurrent:
			p.log.Info("ggml-vulkan's perf logger times groups of nodes (GGML_VK_PERF_LOGGER_CONCURRENT): "+
				"node times are not read; unset it for a time per node", zap.Int("pid", e.pid))
		}
	}
}

// wakeController has the controller look at the processes again, as after an attach.
func (p *Profiler) wakeController() {
	select {
	case p.wake <- struct{}{}:
	default:
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
	traced := p.Traced()
	var closed []uint32
	err := p.counters.Sweep(func(pid, tid uint32) bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, tid))
		keep := traced[int(pid)] && err == nil
		if !keep {
			closed = append(closed, tid)
		}
		return keep
	})
	if err != nil {
		p.log.Debug("closing perf counters", zap.Error(err))
	}
	p.mu.Lock()
	for _, tid := range closed {
		delete(p.asked, tid)
	}
	p.mu.Unlock()
}
