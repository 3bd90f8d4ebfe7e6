package profiler

import (
	"time"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
)

// Node probes are hit once per graph node on every thread, so outside nodes.mode all they
// are attached in windows: from one window's end, wait Nodes.Interval, attach, let
// Nodes.Graphs graphs complete under them, detach. An idle target costs nothing while a
// window is open, so a window waits for its graphs however long they take to come. The
// reader closes a full window itself, as soon as it assembles the last graph: every graph
// traced past it would cost a probe hit per node.

// sampleTick bounds how late a window opens.
const sampleTick = 100 * time.Millisecond

// sample opens the windows that are due. Attaching takes a few milliseconds, under
// p.mu; the ring buffer absorbs the pause.
func (p *Profiler) sample() {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.tracked {
		if !t.attachment.NodesAttached() && now.After(t.nextWindow) && !p.openWindow(t) {
			t.nextWindow = now.Add(p.cfg.Nodes.Interval)
		}
	}
}

// openWindow attaches the node probes of t and says whether any are in place. Called
// with p.mu held.
func (p *Profiler) openWindow(t *tracked) bool {
	err := t.attachment.AttachNodes()
	if err != nil && !t.warned {
		p.log.Warn("node probes not attached", zap.Int("pid", t.proc.PID), zap.Error(err))
		t.warned = true
	}
	if !t.attachment.NodesAttached() {
		return false
	}
	t.windowGraphs = 0
	p.asm.NodesOn(uint32(t.proc.PID), monotonic())
	return true
}

// closeWindow detaches the node probes of t. Called with p.mu held.
func (p *Profiler) closeWindow(t *tracked) {
	p.asm.NodesOff(uint32(t.proc.PID), monotonic())
	if err := t.attachment.DetachNodes(); err != nil {
		p.log.Warn("detaching node probes", zap.Int("pid", t.proc.PID), zap.Error(err))
	}
	t.nextWindow = time.Now().Add(p.cfg.Nodes.Interval)
}

// countTraced counts a traced graph, and closes the window it fills. Called with p.mu
// held.
func (p *Profiler) countTraced(t *tracked, g *assemble.Graph) {
	if !g.Traced {
		return
	}
	p.traced++
	t.windowGraphs++
	if p.cfg.Nodes.Mode == NodesSampled && t.windowGraphs >= p.cfg.Nodes.Graphs && t.attachment.NodesAttached() {
		p.closeWindow(t)
	}
}
