package summary

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
)

// graphRef is what a graph's nodes need of it.
type graphRef struct {
	phase      *phase
	trace      pcommon.TraceID
	start, end pcommon.Timestamp
	timeline   *Timeline
	timed      []timed // its nodes, in order, until the batch's end adds their times
	// cells are the KV cells its attention read, and traced says its nodes came: the
	// deepest traced decode graph stands for the attention at depth (Deepest).
	cells  int64
	traced bool
}

// timed is a node whose time is added once the next node's start is known.
type timed struct {
	op         *Op
	phase      *phase
	layer      int // -1: none
	start, end pcommon.Timestamp
}

// add counts the node's time up to until, and returns it: a node's span runs until its
// last thread leaves it, which overlaps the next node's start by the moments threads take
// to leave a barrier, and by much more when a thread was preempted there. Time counted to
// the next node's start adds up to the graph's time, so that shares are shares.
func (t *timed) add(until pcommon.Timestamp) float64 {
	end := min(t.end, max(until, t.start))
	d := float64(end-t.start) / 1e9
	t.op.TotalMS += d * 1e3
	t.phase.NodeSeconds += d
	if t.layer >= 0 {
		t.phase.layers[t.layer] += d
		byOp := t.phase.opLayer[t.op.Op]
		if byOp == nil {
			byOp = map[int]float64{}
			t.phase.opLayer[t.op.Op] = byOp
		}
		byOp[t.layer] += d
	}
	return d
}

// addTimes adds the time of a graph's nodes, each until the next one's start; a traced
// decode graph deeper in the KV cache than the phase's deepest so far becomes it, with
// its attention's time.
func (g *graphRef) addTimes() {
	deepest := g.traced && g.phase.Name == decode && len(g.timed) > 0 && g.cells >= g.phase.deepest.Cells
	var attention float64
	for i := range g.timed {
		until := g.end
		if i+1 < len(g.timed) {
			until = g.timed[i+1].start
		}
		d := g.timed[i].add(until)
		if o := g.timed[i].op; deepest && (o.Op == "FLASH_ATTN_EXT" || o.Op == "SOFT_MAX" || strings.HasPrefix(o.Weight, KVPrefix)) {
			attention += d
		}
	}
	if deepest {
		g.phase.deepest = Deepest{Cells: g.cells, Seconds: float64(g.end-g.start) / 1e9, Attention: attention}
	}
	g.timed = nil
}

func (a *Aggregator) graph(p *proc, s ptrace.Span) *graphRef {
	attrs := s.Attributes()
	name, tokens := a.phaseOf(s)
	ph := p.phase(name)
	g := &graphRef{phase: ph, trace: s.TraceID(), start: s.StartTimestamp(), end: s.EndTimestamp()}
	threads := schema.Int(attrs, schema.GGMLThreads)
	p.threads = max(p.threads, threads)
	var idle float64 // since its process's previous graph ended, every graph counted
	if p.lastGraph > 0 {
		idle = float64(int64(s.StartTimestamp())-p.lastGraph) / 1e9
	}
	p.lastGraph = max(p.lastGraph, int64(s.EndTimestamp()))
	if v, ok := attrs.Get(schema.GGMLGraphOnCPUNS); ok && threads > 0 {
		faults := schema.Int(attrs, schema.GGMLGraphMajorFaults)
		if schema.Bool(attrs, schema.GGMLGraphOnCPUPerturbed) {
			ph.cpu.Perturbed++
		} else {
			ph.addCPU(schema.Seconds(s), threads, float64(schema.Integer(v))/1e9, float64(schema.Int(attrs, schema.GGMLGraphRunqueueNS))/1e9,
				faults, max(tokens, 1))
		}
		// A graph after an idle spell that read from the disk is not a warm one.
		if p.cold.seen && idle >= IdleAfter && faults > 0 {
			p.cold.resume(name, faults, schema.Seconds(s), idle)
		} else {
			p.cold.add(name, faults, schema.Seconds(s))
		}
	}
	g.cells = schema.Int(attrs, schema.GGMLGraphKVCells)
	ph.MaxCells = max(ph.MaxCells, g.cells)
	if name == decode && tokens == 1 && g.cells > 0 {
		ph.depth.add(g.cells, schema.Seconds(s))
	}
	if !schema.Bool(attrs, schema.GGMLGraphTraced) {
		return g
	}
	g.traced = true
	ph.TracedGraphs++
	ph.KVCells = max(ph.KVCells, g.cells)
	if schema.Bool(attrs, schema.GGMLGraphOnCPUPerturbed) {
		ph.TracedPerturbed++
	}
	if schema.Bool(attrs, schema.GGMLGraphFirst) {
		ph.TracedFirst++
	}
	ph.GraphSeconds += schema.Seconds(s)
	// A decode's graph is the best example of a token, and a new one a second will do.
	if tl := p.timeline; tl != nil && !(name == decode && tl.Phase != decode) &&
		(name == outside || name != decode && tl.Phase == decode || int64(s.StartTimestamp())-tl.Start < timelineEvery) {
		return g
	}
	g.timeline = &Timeline{Phase: name, Tokens: tokens, Start: int64(s.StartTimestamp()),
		Duration: schema.Seconds(s) * 1e6, Threads: int(schema.Int(attrs, schema.GGMLThreads)),
		Critical: float64(schema.Int(attrs, schema.GGMLCriticalPathDurationNS)) / 1e3}
	return g
}

// depthSums are the sums a least-squares line of a graph's seconds against its cells needs.
type depthSums struct {
	n                  int64
	x, y, xx, xy       float64
	minCells, maxCells int64
}

func (d *depthSums) add(cells int64, secs float64) {
	if d.n == 0 || cells < d.minCells {
		d.minCells = cells
	}
	d.maxCells = max(d.maxCells, cells)
	x := float64(cells)
	d.n++
	d.x, d.y, d.xx, d.xy = d.x+x, d.y+secs, d.xx+x*x, d.xy+x*secs
}

// Below minDepthGraphs graphs, or a range of MinDepthRange cells, the line is noise: a
// token's time spreads by some 10% graph to graph, and a few hundred cells add as little.
const (
	minDepthGraphs = 16
	MinDepthRange  = 256
)

// view is the fitted line; nil over too few graphs or too narrow a range.
func (d *depthSums) view() *DepthFit {
	n := float64(d.n)
	den := n*d.xx - d.x*d.x
	if d.n < minDepthGraphs || d.maxCells-d.minCells < MinDepthRange || den <= 0 {
		return nil
	}
	slope := (n*d.xy - d.x*d.y) / den
	return &DepthFit{Graphs: d.n, From: d.minCells, To: d.maxCells, MSPer1k: slope * 1e6, BaseMS: 1e3 * (d.y - slope*d.x) / n}
}

// coldState follows a process's first graph seen against the later ones of its phase:
// the first computes with nothing of the model yet in its page tables or caches (a model
// mapped from its file is faulted in by it, from the page cache or the disk).
type coldState struct {
	seen         bool
	phase        string
	seconds      float64
	faults       int64
	others       map[string]*[2]float64 // by phase: later graphs, and their seconds
	othersFaults int64
	othersGraphs int64
	resumed      Resumed // the slowest graph after an idle spell that took major faults
}

// resume counts a graph that began idle seconds after the one before and took faults
// major page faults, keeping the slowest.
func (c *coldState) resume(phase string, faults int64, secs, idle float64) {
	c.resumed.Graphs++
	c.resumed.AllFaults += faults
	if secs > c.resumed.Seconds {
		c.resumed = Resumed{Phase: phase, Idle: idle, Seconds: secs, Faults: faults, Graphs: c.resumed.Graphs, AllFaults: c.resumed.AllFaults}
	}
}

// resumedView is the slowest graph after an idle spell against the later ones of its
// phase; nil before one, or before a later graph of its phase.
func (c *coldState) resumedView() *Resumed {
	warm, ok := c.warm(c.resumed.Phase)
	if c.resumed.Graphs == 0 || !ok {
		return nil
	}
	r := c.resumed
	r.Warm = warm
	return &r
}

// warm is a later graph's seconds in phase, on average; false before one.
func (c *coldState) warm(phase string) (float64, bool) {
	o := c.others[phase]
	if o == nil || o[0] == 0 {
		return 0, false
	}
	return o[1] / o[0], true
}

// maxColdPhases bounds the phases the later graphs are counted in: runtimes name a handful.
const maxColdPhases = 8

func (c *coldState) add(phase string, faults int64, secs float64) {
	if !c.seen {
		c.seen, c.phase, c.seconds, c.faults = true, phase, secs, faults
		return
	}
	c.othersGraphs++
	c.othersFaults += faults
	if c.others == nil {
		c.others = map[string]*[2]float64{}
	}
	o := c.others[phase]
	if o == nil {
		if len(c.others) >= maxColdPhases {
			return
		}
		o = &[2]float64{}
		c.others[phase] = o
	}
	o[0]++
	o[1] += secs
}

// view is the first graph against the later ones of its phase; nil before one of those.
func (c *coldState) view() *Cold {
	warm, ok := c.warm(c.phase)
	if !c.seen || !ok {
		return nil
	}
	return &Cold{Phase: c.phase, Seconds: c.seconds, Faults: c.faults, Warm: warm, WarmGraphs: c.othersGraphs, WarmFaults: c.othersFaults}
}

// minQuiet is how many graphs whose threads had their CPUs the cost of contention needs
// as its measure.
const minQuiet = 3

// addCPU counts a graph of secs computed by threads threads, which had a CPU for onCPU
// seconds (summed over the process's threads), waited for one wait seconds and took
// faults major page faults.
func (ph *phase) addCPU(secs float64, threads int64, onCPU, wait float64, faults, tokens int64) {
	c := &ph.cpu
	c.Graphs++
	c.Wall += secs
	c.ThreadSeconds += secs * float64(threads)
	c.OnCPU += onCPU
	c.Wait += wait
	c.MajorFaults += faults
	if onCPU < roofline.StarvedBelow*secs*float64(threads) {
		c.Contended++
		c.ContendedSeconds += secs
		ph.contendedTokens += tokens
	} else {
		ph.quietGraphs++
		ph.quietSeconds += secs
		ph.quietTokens += tokens
	}
}
