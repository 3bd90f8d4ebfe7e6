package profiler

import (
	"time"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/probe"
)

// The reader only decodes, describes, assembles and builds spans. What it finds that
// needs acting on travels to the controller as effects, so that nothing below the reader
// calls back into it: the controller opens and closes sampling windows, has processes
// send their nodes' detail again, and reads new contexts and model files from /proc.

// effectKind is what the reader asks of the controller.
type effectKind uint8

const (
	filled      effectKind = iota // a sampling window's last graph was assembled: close it
	redescribe                    // a known node came undescribed: have every detail sent again
	contextSeen                   // a process decodes with a new llama_context: read it
)

type effect struct {
	kind effectKind
	pid  int
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
			}
		}
		var window time.Time
		if sampled {
			window = p.windows.Tick()
		}
		p.mu.Unlock()
		for _, pid := range contexts {
			p.readContext(pid)
		}
		now := time.Now()
		switch missing := p.modelsMissing(); {
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

// wakeController has the controller look at the processes again, as after an attach.
func (p *Profiler) wakeController() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
