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
	filled     effectKind = iota // a sampling window's last graph was assembled: close it
	redescribe                   // a known node came undescribed: have every detail sent again
	newContext                   // a process decodes with a new llama_context: read it
)

type effect struct {
	kind effectKind
	pid  int
}

// signal wakes the controller if the reader posted effects. Called with p.mu held.
func (p *Profiler) signal() {
	if len(p.effects) == 0 {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default: // a wakeup is pending already
	}
}

// controlLoop acts on the reader's effects as they come, opens the sampling windows that
// are due, and every modelSearch looks for the model files of processes that have none.
func (p *Profiler) controlLoop() {
	defer p.wg.Done()
	sampled := p.cfg.Nodes.Mode == NodesSampled && p.cfg.Layers.Runtime
	search := time.Now().Add(modelSearch)
	timer := time.NewTimer(modelSearch)
	defer timer.Stop()
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
			case newContext:
				contexts = append(contexts, e.pid)
			}
		}
		next := search
		if sampled {
			if w := p.windows.Tick(); !w.IsZero() && w.Before(next) {
				next = w
			}
		}
		p.mu.Unlock()
		for _, pid := range contexts {
			p.readContext(pid)
		}
		if now := time.Now(); !now.Before(search) {
			p.findModels()
			p.readContexts() // any left waiting
			search = now.Add(modelSearch)
			if search.Before(next) {
				next = search
			}
		}
		timer.Reset(max(time.Until(next), 0))
	}
}
