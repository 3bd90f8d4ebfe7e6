package profiler

import (
	"time"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/probe"
)

// Node probes are hit once per graph node on every thread, so outside nodes.mode all they
// are attached in windows: from one window's end, wait Nodes.Interval, attach, let
// Nodes.Graphs graphs complete under them, detach. An idle target costs nothing while a
// window is open, so a window waits for its graphs however long they take to come. The
// reader closes a full window itself, as soon as it assembles the last graph: every graph
// traced past it would cost a probe hit per node.

// sample opens the windows that are due, and notes when the next one is. The reader
// calls it every tick, and wakes for it when a window is due sooner. Attaching takes a
// few milliseconds, under p.mu; the ring buffer absorbs the pause.
func (p *Profiler) sample() {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.windowDue = time.Time{}
	for _, t := range p.tracked {
		if t.attachment.NodesAttached() {
			continue
		}
		if now.After(t.nextWindow) && !p.openWindow(t) {
			t.nextWindow = now.Add(p.cfg.Nodes.Interval)
		}
		if !t.attachment.NodesAttached() {
			p.due(t.nextWindow)
		}
	}
}

// due notes that a window opens at when. Called with p.mu held.
func (p *Profiler) due(when time.Time) {
	if p.windowDue.IsZero() || when.Before(p.windowDue) {
		p.windowDue = when
	}
}

// openWindow attaches the node probes of t and says whether any are in place. Called
// with p.mu held.
func (p *Profiler) openWindow(t *tracked) bool {
	// A graph in flight as the probes come is described from the middle on: every graph
	// is described again from its start. Before the attach, so that nothing delays the
	// window's start past the next graph's.
	if t.attachment.SeesBuilds() {
		if err := probe.Remember(&p.objs.ProfinferMaps, t.proc.PID, monotonic()); err != nil {
			p.log.Debug("node details sent at every node start", zap.Int("pid", t.proc.PID), zap.Error(err))
		}
	}
	err := t.attachment.AttachNodes()
	if err != nil && !t.warned {
		msg := "node probes not attached"
		if t.attachment.NodesAttached() {
			msg = "some node probes not attached"
		}
		p.log.Warn(msg, zap.Int("pid", t.proc.PID), zap.Error(err))
		t.warned = true
	}
	if !t.attachment.NodesAttached() {
		return false
	}
	// The programs count the graphs that start from here on, all traced but one that
	// starts before the window's time below; should one, every graph and decode end
	// after the count wakes the reader until it has read enough.
	p.window(t, p.cfg.Nodes.Graphs)
	graphs := 0 // NodesAll: one window, every graph
	if p.cfg.Nodes.Mode == NodesSampled {
		graphs = p.cfg.Nodes.Graphs
	}
	p.asm.NodesOn(uint32(t.proc.PID), monotonic(), graphs)
	return true
}

// closeWindow detaches the node probes of t. Called with p.mu held.
func (p *Profiler) closeWindow(t *tracked) {
	p.asm.NodesOff(uint32(t.proc.PID), monotonic())
	p.window(t, 0)
	p.closeLater(t.attachment.DetachNodes())
	t.nextWindow = time.Now().Add(p.cfg.Nodes.Interval)
	p.due(t.nextWindow)
}

// countTraced counts a traced graph, and closes the window it fills. Called with p.mu
// held.
func (p *Profiler) countTraced(t *tracked, g *assemble.Graph) {
	if !g.Traced {
		return
	}
	p.traced++
	if g.FillsWindow && t.attachment.NodesAttached() {
		p.closeWindow(t)
	}
}

// window tells the programs how many graphs are left to start in the sampling window on
// t, for them to wake the reader as the last ends. Called with p.mu held.
func (p *Profiler) window(t *tracked, graphs int) {
	if p.cfg.Nodes.Mode != NodesSampled {
		return // no window to close
	}
	if err := probe.Window(&p.objs.ProfinferMaps, t.proc.PID, graphs); err != nil {
		p.log.Debug("marking the sampling window", zap.Int("pid", t.proc.PID), zap.Error(err))
	}
}
