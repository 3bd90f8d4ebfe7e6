package compare

import (
	"math"
	"math/rand/v2"
	"slices"
)

// role is where a row's time per unit comes from.
type role uint8

const (
	// roleEvery rows are timed in every step: a device's work, copies.
	roleEvery role = iota
	// roleGraph rows are the CPU graphs' time, every graph's, traced or not.
	roleGraph
	// roleNode rows are nodes of traced CPU graphs: their share of the traced graphs'
	// time, of the CPU graphs' time per unit. Tracing slows the graphs it traces, and
	// only some are traced: shares of them apply to every graph.
	roleNode
)

func (d *ident) role() role {
	switch {
	case d.key.kind == kindGraph:
		return roleGraph
	case d.key.kind != kindNode || d.onDevice:
		return roleEvery
	}
	return roleNode
}

// sample is one side's phase as the bootstrap resamples it: its steps' blocks, which
// hold every step's time and the rows timed in every step, and its traced graphs'
// blocks, which hold the traced graphs' time and their nodes'.
type sample struct {
	steps, graphs part
	roles         []role // per row
}

// part is one series' blocks: per block its units (tokens or steps), its time and each
// row's seconds.
type part struct {
	units, secs []float64
	rows        [][]float64 // [block][row]
}

// newSample sums each group's nodes of one side (a: side A) per block, in tokens or in
// steps.
func newSample(ph *phaseFold, groups []*group, a, tokens bool) *sample {
	s := &sample{roles: make([]role, len(groups))}
	for gi, g := range groups {
		s.roles[gi] = sideRole(&ph.table, g.side(a))
	}
	fill := func(p *part, sr *series, nodes bool) {
		for _, b := range sr.blocks {
			units := float64(b.steps)
			if tokens {
				units = float64(b.tokens)
			}
			p.units = append(p.units, units)
			p.secs = append(p.secs, b.seconds)
			row := make([]float64, len(groups))
			for gi, g := range groups {
				if (s.roles[gi] == roleNode) != nodes {
					continue
				}
				for _, id := range g.side(a) {
					if int(id) < len(b.cells) {
						row[gi] += b.cells[id]
					}
				}
			}
			p.rows = append(p.rows, row)
		}
	}
	fill(&s.steps, &ph.steps, false)
	fill(&s.graphs, &ph.graphs, true)
	return s
}

// sideRole is the role of a row's nodes on one side: all have the same, a row being of
// one kind on one backend.
func sideRole(t *table, ids []int32) role {
	if len(ids) == 0 {
		return roleEvery // absent: nothing to divide
	}
	return t.list[ids[0]].role()
}

// sum adds the part's blocks, weighted by w (nil: each once), into rows, and returns
// their units and time.
func (p *part) sum(w []float64, rows []float64) (units, secs float64) {
	for i := range p.units {
		wi := 1.0
		if w != nil {
			wi = w[i]
		}
		if wi == 0 {
			continue
		}
		units += wi * p.units[i]
		secs += wi * p.secs[i]
		for g, v := range p.rows[i] {
			rows[g] += wi * v
		}
	}
	return units, secs
}

// estimate fills out with the seconds per unit of the phase (out[0]), of each row, and
// of what the rows leave (the last), the steps' blocks weighted by ws and the graphs'
// by wg (nil: each once). The CPU graphs' rows keep what their nodes leave of them. It
// returns false where the weighted blocks hold no step, or nodes no traced graph.
func (s *sample) estimate(ws, wg []float64, out []float64) bool {
	clear(out)
	rows := out[1 : len(out)-1]
	all, secs := s.steps.sum(ws, rows)
	_, traced := s.graphs.sum(wg, rows)
	if all == 0 {
		return false
	}
	out[0] = secs / all
	var graphs, nodes float64
	for g, r := range s.roles {
		if r != roleNode {
			rows[g] /= all
		}
		if r == roleGraph {
			graphs += rows[g]
		}
	}
	for g, r := range s.roles {
		if r == roleNode {
			if traced == 0 {
				return false
			}
			rows[g] *= graphs / traced
			nodes += rows[g]
		}
	}
	rest := out[0]
	for g, r := range s.roles {
		if r == roleGraph && nodes > 0 {
			rows[g] *= 1 - nodes/graphs
		}
		rest -= rows[g]
	}
	out[len(out)-1] = rest
	return true
}

// bootstrap estimates B less A for the total (index 0), each row and the rest (the
// last), and B's total over A's less one (rel): the point on the blocks as they are,
// the interval from resamples that draw each series' blocks with replacement, as many
// as it has. A block is a run of consecutive steps or traced graphs, so that the
// correlation of neighbours and a run's drift stay in the spread.
func bootstrap(a, b *sample, resamples int) (point, rel Estimate, diffs []Estimate) {
	n := len(a.roles) + 2
	va, vb := make([]float64, n), make([]float64, n)
	a.estimate(nil, nil, va)
	b.estimate(nil, nil, vb)
	diffs = make([]Estimate, n)
	for i := range diffs {
		diffs[i].Value = vb[i] - va[i]
	}
	if va[0] > 0 {
		rel.Value = vb[0]/va[0] - 1
	}
	draws := make([][]float64, n+1)    // the last: rel
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: the same input gives the same intervals
	w := [4][]float64{make([]float64, len(a.steps.units)), make([]float64, len(a.graphs.units)),
		make([]float64, len(b.steps.units)), make([]float64, len(b.graphs.units))}
	for range resamples {
		for _, wi := range w {
			draw(rng, wi)
		}
		if !a.estimate(w[0], w[1], va) || !b.estimate(w[2], w[3], vb) || va[0] <= 0 {
			continue
		}
		for i := range n {
			draws[i] = append(draws[i], vb[i]-va[i])
		}
		draws[n] = append(draws[n], vb[0]/va[0]-1)
	}
	for i := range n {
		diffs[i].Low, diffs[i].High = interval(draws[i], diffs[i].Value)
	}
	rel.Low, rel.High = interval(draws[n], rel.Value)
	return diffs[0], rel, diffs
}

// draw sets w to how often each of len(w) blocks is drawn in len(w) draws.
func draw(rng *rand.Rand, w []float64) {
	clear(w)
	for range w {
		w[rng.IntN(len(w))]++
	}
}

// interval is the central confidence interval of the draws; the point where there are
// none.
func interval(xs []float64, point float64) (lo, hi float64) {
	if len(xs) == 0 {
		return point, point
	}
	slices.Sort(xs)
	q := func(p float64) float64 {
		return xs[min(int(math.Floor(p*float64(len(xs)))), len(xs)-1)]
	}
	return q((1 - confidence) / 2), q((1 + confidence) / 2)
}

// beyond says whether a change lies wholly beyond ±band: a real change must be more
// than its own run's spread (the interval) and more than two runs of the same thing
// differ (the band, from the floor).
func beyond(e Estimate, band float64) bool {
	return e.Low > band || e.High < -band
}
