package summary

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/profinfer/profinfer/internal/signals"
)

// Snapshot returns the view as of now, the busiest process first.
func (a *Aggregator) Snapshot() *View {
	v := &View{Generated: time.Now().UTC()}
	for _, p := range a.procs {
		v.Processes = append(v.Processes, p.snapshot())
	}
	// The busiest first: the page opens on it.
	slices.SortFunc(v.Processes, func(x, y *Process) int {
		return cmp.Or(cmp.Compare(y.tokens(), x.tokens()), strings.Compare(x.Title+x.ID, y.Title+y.ID))
	})
	return v
}

func (p *Process) tokens() int64 {
	var n int64
	for _, ph := range p.Phases {
		n += ph.Tokens
	}
	return n
}

func (p *proc) snapshot() *Process {
	out := &Process{ID: p.id, Title: p.title, Model: p.model, Runtime: p.runtime, Resource: slices.Clone(p.resource),
		Roofs: p.roofs, Rate: slices.Clone(p.rate), Timeline: p.timeline, LastSeen: p.lastSeen.UTC(),
		Latency: p.latency.quantiles(), Findings: []Finding{}, SIMD: p.simd}
	if !p.nextWindow.IsZero() {
		out.NextWindow = p.nextWindow.UTC()
	}
	if p.requests.Count > 0 {
		r := p.requests
		r.TTFT, r.TPOT = p.ttft.quantiles(), p.tpot.quantiles()
		r.GapMedian, r.GapMax = p.gapMedian.quantiles(), p.gapMax.quantiles()
		r.Time = slices.Clone(r.Time)
		if r.Stalled > 0 {
			r.StallRatio = StallRatio
		}
		if w := p.wait.quantiles(); w.Count > 0 {
			r.Wait = &w
		}
		out.Requests = &r
	}
	if p.jobs.Count > 0 {
		j := p.jobs
		q := p.rtf.quantiles() // kept as if seconds
		j.RTF = Quantiles{Count: q.Count, P50: q.P50 / 1e3, P90: q.P90 / 1e3, P99: q.P99 / 1e3, Max: q.Max / 1e3}
		out.Jobs = &j
	}
	if out.Roofs.FLOPS == 0 && out.Roofs.Bandwidth == 0 && (p.derived.FLOPS > 0 || p.derived.Bandwidth > 0 || p.derived.Int8 > 0) {
		out.Roofs = p.derived
		out.Roofs.Source = "derived from the spans' peak fractions"
	}
	out.Serving = p.servingView()
	for _, name := range []string{prefill, encode, decode, mixed, compute, outside} {
		if ph := p.phases[name]; ph != nil {
			out.Phases = append(out.Phases, ph.snapshot(out.Roofs, out.SIMD))
		}
	}
	moe := p.moeMetric
	if len(moe) == 0 {
		moe = p.moeSpans
	}
	for layer, c := range moe {
		out.MoE = append(out.MoE, MoELayer{Layer: layer, Selections: slices.Clone(c), Imbalance: signals.Imbalance(c)})
	}
	slices.SortFunc(out.MoE, func(x, y MoELayer) int { return cmp.Compare(x.Layer, y.Layer) })
	for _, b := range p.backends {
		c := *b
		c.Ops = maps.Clone(b.Ops)
		c.Layers = slices.Clone(b.Layers)
		out.Backends = append(out.Backends, c)
	}
	out.Loaded = slices.Clone(p.loaded)
	out.Software = p.software
	slices.SortFunc(out.Backends, func(x, y Backend) int { return strings.Compare(x.Backend, y.Backend) })
	for _, c := range p.copies {
		out.Copies = append(out.Copies, *c)
	}
	slices.SortFunc(out.Copies, func(x, y Copy) int {
		return strings.Compare(x.Source+"\x00"+x.Destination, y.Source+"\x00"+y.Destination)
	})
	for c := range p.counters {
		out.Counters = append(out.Counters, c)
	}
	slices.Sort(out.Counters)
	if q := p.quota; q.cpus > 0 {
		// No period passed between the readings (one reading, or one and its repeat
		// as the process exited): what the cgroup counted since it was made.
		all := q.periods.first == q.periods.last
		out.Quota = &Quota{Cgroup: q.cgroup, CPUs: q.cpus, Periods: int64(q.periods.delta(all)), Throttled: int64(q.throttled.delta(all)),
			ThrottledSeconds: q.throttledTime.delta(all), SinceMade: all, Threads: p.threads}
	}
	out.Cold = p.cold.view()
	out.Resumed = p.cold.resumedView()
	if c := p.cpus; c.Allowed > 0 {
		c.Threads = p.threads
		if p.cpusTime > 0 {
			c.Idle, c.Measured = p.idleTime/p.cpusTime*float64(c.Allowed), true
			if p.ownTime > 0 {
				c.Others = max(p.cpusTime-p.idleTime-p.ownTime, 0) / p.cpusTime * float64(c.Allowed)
				c.OthersMeasured = true
			}
		}
		out.CPUs = &c
	}
	if p.end != nil {
		e := *p.end
		e.Cut = p.cut
		e.Text = e.text(p.runtime)
		out.End = &e
	}
	return out
}

func (ph *phase) snapshot(roofs Roofs, simd SIMD) *Phase {
	out := ph.Phase
	out.Ops = nil
	if out.DecodeSeconds > 0 {
		out.TokensPerSec = float64(out.Tokens) / out.DecodeSeconds
	}
	out.Widths = ph.widthsView()
	out.Depth = ph.depth.view()
	if ph.deepest.Seconds > 0 {
		d := ph.deepest
		out.Deepest = &d
	}
	if c := ph.cpu; c.Graphs > 0 || c.Perturbed > 0 {
		c.judge()
		if ph.quietGraphs >= minQuiet && ph.contendedTokens > 0 {
			c.Cost = max(c.ContendedSeconds-float64(ph.contendedTokens)*ph.quietSeconds/float64(ph.quietTokens), 0)
		}
		out.CPU = &c
	}
	total := cmp.Or(out.GraphSeconds, out.NodeSeconds)
	for _, o := range ph.ops {
		r := *o
		r.Counters = maps.Clone(o.Counters)
		r.MeanUS = r.TotalMS * 1e3 / float64(max(r.Calls, 1))
		if total > 0 {
			r.Share = r.TotalMS / 1e3 / total
		}
		if secs := r.TotalMS / 1e3; secs > 0 && r.flops > 0 {
			r.FLOPS = r.flops / secs
			r.Bandwidth = r.byt / secs
		}
		if r.byt > 0 {
			r.Intensity = r.flops / r.byt
		}
		r.Roof, r.PeakFrac = o.roofKind(roofs), o.attained.Fraction()
		r.Bound, r.Why = out.judgeOp(&r, simd)
		out.Ops = append(out.Ops, &r)
	}
	slices.SortFunc(out.Ops, func(x, y *Op) int {
		return cmp.Or(cmp.Compare(y.TotalMS, x.TotalMS), strings.Compare(x.Op+x.Weight, y.Op+y.Weight))
	})
	for l, secs := range ph.layers {
		out.Layers = append(out.Layers, Layer{Layer: l, Seconds: secs, Share: secs / max(total, 1e-12)})
	}
	slices.SortFunc(out.Layers, func(x, y Layer) int { return cmp.Compare(x.Layer, y.Layer) })
	out.OpLayer = ph.opLayerMatrix(out.Layers)
	return &out
}

// opLayerMatrix keeps the ops that took the most layer time, at most 16 rows.
func (ph *phase) opLayerMatrix(layers []Layer) *OpLayer {
	if len(layers) == 0 {
		return nil
	}
	type row struct {
		op    string
		secs  float64
		cells map[int]float64
	}
	var rows []row
	for op, cells := range ph.opLayer {
		r := row{op: op, cells: cells}
		for _, s := range cells {
			r.secs += s
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y row) int { return cmp.Or(cmp.Compare(y.secs, x.secs), strings.Compare(x.op, y.op)) })
	rows = rows[:min(len(rows), 16)]
	m := &OpLayer{}
	for _, l := range layers {
		m.Layers = append(m.Layers, l.Layer)
	}
	for _, r := range rows {
		m.Ops = append(m.Ops, r.op)
		cells := make([]float64, len(layers))
		for i, l := range layers {
			cells[i] = r.cells[l.Layer]
		}
		m.Seconds = append(m.Seconds, cells)
	}
	return m
}
