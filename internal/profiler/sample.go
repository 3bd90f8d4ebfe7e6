package profiler

import (
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/probe"
)

// Node sampling: internal/window decides when each process's window opens; the reader
// closes a full window itself, as soon as it assembles the last graph: every graph traced
// past it would cost a probe hit per node.

// sample opens the windows that are due, and notes when the next one is. The reader
// calls it every tick, and wakes for it when a window is due sooner. Attaching takes a
// few milliseconds, under p.mu; the ring buffer absorbs the pause.
func (p *Profiler) sample() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.windowDue = p.windows.Tick()
}

// countTraced counts a traced graph, and notes the window it fills, for endWindows.
// Called with p.mu held, from the assembler's sink: ending the window now would call back
// into the assembler from inside its own call.
func (p *Profiler) countTraced(t *tracked, g *assemble.Graph) {
	if !g.Traced {
		return
	}
	p.traced++
	if g.FillsWindow {
		p.filled = append(p.filled, t.proc.PID)
	}
}

// endWindows ends the windows filled during the assembler's last call. Called with p.mu
// held, once that call returned.
func (p *Profiler) endWindows() {
	for _, pid := range p.filled {
		p.windowDue = p.windows.Filled(pid)
	}
	p.filled = p.filled[:0]
}

// nodeProbes are the node probes of one traced process, as the window scheduler opens
// and closes them, with p.mu held.
type nodeProbes struct {
	p *Profiler
	t *tracked
}

func (n nodeProbes) Open() bool {
	p, t := n.p, n.t
	// A graph in flight as the probes come is described from the middle on: every graph
	// is described again from its start. Before the attach, so that nothing delays the
	// window's start past the next graph's.
	if t.attachment.SeesBuilds() {
		if err := probe.Remember(&p.bpf.ProfinferMaps, t.proc.PID, monotonic()); err != nil {
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
	n.window(p.cfg.Nodes.Graphs)
	graphs := 0 // NodesAll: one window, every graph
	if p.cfg.Nodes.Mode == NodesSampled {
		graphs = p.cfg.Nodes.Graphs
	}
	p.asm.NodesOn(uint32(t.proc.PID), monotonic(), graphs)
	return true
}

func (n nodeProbes) Close() {
	n.p.asm.NodesOff(uint32(n.t.proc.PID), monotonic())
	n.window(0)
	n.p.closeLater(n.t.attachment.DetachNodes())
}

// window tells the programs how many graphs are left to start in the sampling window, for
// them to wake the reader as the last ends.
func (n nodeProbes) window(graphs int) {
	if n.p.cfg.Nodes.Mode != NodesSampled {
		return // no window to close
	}
	if err := probe.Window(&n.p.bpf.ProfinferMaps, n.t.proc.PID, graphs); err != nil {
		n.p.log.Debug("marking the sampling window", zap.Int("pid", n.t.proc.PID), zap.Error(err))
	}
}
