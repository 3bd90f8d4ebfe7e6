package profiler

import (
	"slices"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/window"
)

// Node sampling: internal/window decides when each process's window opens, and the
// controller opens it; the reader posts a window's end as soon as it assembles the last
// graph: every graph traced past it costs a probe hit per node.

// graphDone counts a graph of t delivered, marks a new scheduler's first (assemble.Graph's
// First), and for a traced graph posts the end of the window it fills.
func (in *ingest) graphDone(t *inProc, g *assemble.Graph) {
	t.graphs++
	g.First, t.fresh = t.fresh, false
	if !g.Traced {
		return
	}
	in.traced++
	if g.FillsWindow {
		in.effects = append(in.effects, effect{kind: filled, pid: t.proc.PID})
		t.windowEnded()
	}
}

// windowEnded forgets the untraced graphs of t's phases that the controller was told
// of: a window that traced none of a phase (one brought forward for it that traced the
// graph in flight of another) leaves the phase's next graph to tell again. Else a phase
// whose graphs came while its window's probes were being placed (some 0.7 s here, 8
// decode graphs of a 1B model) was told of no more, and its ops waited the interval.
func (t *inProc) windowEnded() {
	for ph, n := range t.phases {
		if n != phaseTold {
			delete(t.phases, ph)
		}
	}
}

// notePhases tells the window scheduler which phases of step d a window traced: its CPU
// graphs' phase (a decode's at its depth band), and each device's share of it (a GPU's
// split has its nodes described in windows only). A phase that no window traced yet
// brings the next window forward.
func (in *ingest) notePhases(t *inProc, d *assemble.Step) {
	if !in.cfg.sampled() || d.Dropped {
		return
	}
	phase := d.Phase
	if d.Kind == assemble.LlamaDecode {
		phase = requests.Phase(d)
	}
	if len(d.Graphs) > 0 {
		ph := window.Phase{Name: phase}
		if phase == assemble.PhaseDecode {
			ph.Depth = window.DepthBand(d.Graphs[0].Cells)
		}
		in.notePhase(t, ph, slices.ContainsFunc(d.Graphs, func(g *assemble.Graph) bool { return g.Traced }))
	}
	for i := range d.Splits {
		if sl := &d.Splits[i]; sl.Device {
			in.notePhase(t, window.Phase{Name: phase, Backend: sl.Backend}, len(sl.Nodes) > 0 || len(sl.Timed) > 0)
		}
	}
}

// phaseTold marks a phase whose traced graph the controller was told of; below it, the
// untraced graphs it was told of. Past untracedTold it is told of no more: the scheduler
// brings a window forward for a phase a few times at most (one told of while a window
// opens does not), and each effect wakes the controller.
const (
	phaseTold    = 0xff
	untracedTold = 8
)

func (in *ingest) notePhase(t *inProc, phase window.Phase, traced bool) {
	n := t.phases[phase]
	switch {
	case n == phaseTold:
		return
	case traced:
		n = phaseTold
		in.effects = append(in.effects, effect{kind: phaseTraced, pid: t.proc.PID, phase: phase})
	case n < untracedTold:
		n++
		in.effects = append(in.effects, effect{kind: phaseUntraced, pid: t.proc.PID, phase: phase})
	default:
		return
	}
	if t.phases == nil {
		t.phases = map[window.Phase]uint8{}
	}
	t.phases[phase] = n
}

// nodeProbes are the node probes of one traced process, as the window scheduler opens
// and closes them on the controller.
type nodeProbes struct {
	p *Profiler
	t *ctlProc
}

func (n nodeProbes) Open(catchUp bool) bool {
	p, t := n.p, n.t
	// A graph in flight as the probes come is described from the middle on: every graph
	// is described again from its start. Before the attach, so that nothing delays the
	// window's start past the next graph's.
	if t.attachment.SeesBuilds() {
		if err := probe.Remember(&p.bpf.ProfinferMaps, t.pid, monotonic()); err != nil {
			p.log.Debug("node details sent at every node start", zap.Int("pid", t.pid), zap.Error(err))
		}
	}
	done := p.busy()
	err := t.attachment.AttachNodes()
	done()
	switch {
	case err == nil, t.warned:
	case p.reg.Vanished(t.pid): // its exit may reach the controller after its window is due
		p.log.Debug("node probes not attached: the process exited or unmapped GGML", zap.Int("pid", t.pid), zap.Error(err))
	default:
		msg := "node probes not attached"
		if t.attachment.NodesAttached() {
			msg = "some node probes not attached"
		}
		p.log.Warn(msg, zap.Int("pid", t.pid), zap.Error(err))
		t.warned = true
	}
	if !t.attachment.NodesAttached() {
		return false
	}
	graphs := 0 // NodesAll: one window, every graph
	if p.cfg.Nodes.Mode == NodesSampled {
		graphs = p.cfg.Nodes.Graphs
		if catchUp {
			graphs = max(graphs, window.CatchUpGraphs)
		}
	}
	// The programs count the graphs that start from here on, all traced but one that
	// starts before the window's time below; should one, every graph and decode end
	// after the count wakes the reader until it has read enough.
	n.window(graphs)
	on, pid := monotonic(), uint32(t.pid)
	p.do(func(in *ingest) { in.asm.NodesOn(pid, on, graphs) })
	return true
}

func (n nodeProbes) Close() {
	p, pid := n.p, uint32(n.t.pid)
	off := monotonic()
	p.do(func(in *ingest) { in.asm.NodesOff(pid, off) })
	n.window(0)
	done := p.busy()
	p.closeLater(n.t.attachment.DetachNodes())
	done()
}

// window tells the programs how many graphs are left to start in the sampling window, for
// them to wake the reader as the last ends.
func (n nodeProbes) window(graphs int) {
	if n.p.cfg.Nodes.Mode != NodesSampled {
		return // no window to close
	}
	if err := probe.Window(&n.p.bpf.ProfinferMaps, n.t.pid, graphs); err != nil {
		n.p.log.Debug("marking the sampling window", zap.Int("pid", n.t.pid), zap.Error(err))
	}
}
