package profiler

import (
	"os"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/export"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/window"
)

// Node sampling: internal/window decides when each process's window opens, and the
// controller opens it; the reader posts a window's end as soon as it assembles the last
// graph: every graph traced past it costs a probe hit per node.

// countTraced counts a traced graph, and posts the end of the window it fills. Called
// with p.mu held.
func (p *Profiler) countTraced(t *tracked, g *assemble.Graph) {
	if !g.Traced {
		return
	}
	p.traced++
	if g.FillsWindow {
		p.effects = append(p.effects, effect{kind: filled, pid: t.proc.PID})
	}
}

// notePhases tells the window scheduler which phases of step d a window traced: its CPU
// graphs' phase, and each device's share of it (a GPU's split has its nodes described in
// windows only). A phase that no window traced yet brings the next window forward.
// Called with p.mu held.
func (p *Profiler) notePhases(t *tracked, d *assemble.Step) {
	if p.cfg.Nodes.Mode != NodesSampled || !p.cfg.Layers.Runtime || d.Dropped {
		return
	}
	phase := d.Phase
	if d.Kind == assemble.LlamaDecode {
		phase = export.Phase(d.Tokens)
	}
	if len(d.Graphs) > 0 {
		p.notePhase(t, window.Phase{Name: phase}, slices.ContainsFunc(d.Graphs, func(g *assemble.Graph) bool { return g.Traced }))
	}
	for i := range d.Splits {
		if sl := &d.Splits[i]; sl.Device {
			p.notePhase(t, window.Phase{Name: phase, Backend: sl.Backend}, len(sl.Nodes) > 0 || len(sl.Timed) > 0)
		}
	}
}

func (p *Profiler) notePhase(t *tracked, phase window.Phase, traced bool) {
	switch {
	case traced:
		p.windows.Traced(t.proc.PID, phase)
	case p.windows.Untraced(t.proc.PID, phase):
		p.log.Debug("sampling window brought forward", zap.Int("pid", t.proc.PID), zap.String("phase", phase.Name), zap.String("backend", phase.Backend))
		p.wakeController() // its Tick opens the window
	}
}

// nodeProbes are the node probes of one traced process, as the window scheduler opens
// and closes them, on the controller or (a first window) at attach, with p.mu held.
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
	p.asm.Busy(monotonic())
	err := t.attachment.AttachNodes()
	p.asm.Idle(monotonic())
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
	n.p.asm.Busy(monotonic())
	n.p.closeLater(n.t.attachment.DetachNodes())
	n.p.asm.Idle(monotonic())
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

// workload names what process pid runs, for its windows' schedule (window.Add): its
// executable and its arguments; "" where they cannot be read.
func workload(pid int, exe string) string {
	args, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(args) == 0 {
		return ""
	}
	return exe + "\x00" + string(args)
}
