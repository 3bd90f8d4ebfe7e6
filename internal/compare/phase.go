package compare

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// diffPhase compares one phase of the two sides; either may lack it.
func diffPhase(name string, pa, pb *phaseFold, opt Options) PhaseDiff {
	tokens := pa != nil && pb != nil && pa.tokens() > 0 && pb.tokens() > 0
	d := PhaseDiff{Phase: name, Unit: "token", A: summarize(pa, tokens), B: summarize(pb, tokens), Rows: []Row{}}
	if !tokens {
		d.Unit = "step"
	}
	switch {
	case pa == nil:
		d.Verdict = "only in B"
		d.Notes = append(d.Notes, fmt.Sprintf("A computed no %s phase", name))
		return d
	case pb == nil:
		d.Verdict = "only in A"
		d.Notes = append(d.Notes, fmt.Sprintf("B computed no %s phase", name))
		return d
	case !tokens && pa.tokens()+pb.tokens() > 0:
		d.Notes = append(d.Notes, "one side counts tokens and the other does not: compared per step")
	}
	groups := align(&pa.table, &pb.table)
	if d.A.TracedSteps == 0 || d.B.TracedSteps == 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("no traced graph in %s on side %s (node tracing off, or no sampling window over it): the change is not split over the ops, only over CPU graphs, device work and copies",
			name, untraced(d)))
		groups = slices.DeleteFunc(groups, func(g *group) bool {
			return sideRole(&pa.table, g.a) == roleNode || sideRole(&pb.table, g.b) == roleNode
		})
	}
	sa, sb := newSample(pa, groups, true, tokens), newSample(pb, groups, false, tokens)
	n := len(groups) + 2
	va, vb := make([]float64, n), make([]float64, n)
	sa.estimate(nil, nil, va)
	sb.estimate(nil, nil, vb)
	total, rel, diffs := bootstrap(sa, sb, opt.Resamples)
	d.Change, d.Relative = scaled(total, 1e3), rel
	d.Floor = cmp.Or(opt.Floor, DefaultFloor(name))
	stepsJudged := min(d.A.Blocks, d.B.Blocks) >= minBlocks
	fewGraphs := min(d.A.GraphBlocks, d.B.GraphBlocks) < minBlocks
	d.Noise = 1e3 * d.Floor * max(va[0], vb[0])
	d.Beyond = stepsJudged && beyond(total, d.Floor*max(va[0], vb[0]))
	switch {
	case d.Beyond && total.Value > 0:
		d.Verdict = "slower"
	case d.Beyond:
		d.Verdict = "faster"
	case !stepsJudged:
		d.Verdict = "too few steps to tell"
	default:
		d.Verdict = "no change beyond noise"
		if math.Abs(total.Value) > d.Floor*max(va[0], vb[0]) {
			d.Notes = append(d.Notes, fmt.Sprintf("the estimate, %+.1f%%, passes the noise floor, but its interval (%+.3g … %+.3g ms) reaches within it: "+
				"a side's steps were uneven (a slow repetition, a busy neighbour); longer runs, or more of them, would tell", 100*rel.Value, 1e3*total.Low, 1e3*total.High))
		}
	}
	nodes := slices.Contains(sa.roles, roleNode) || slices.Contains(sb.roles, roleNode)
	row := func(r Row, i int, ofNodes bool) Row {
		r.A, r.B = 1e3*va[i], 1e3*vb[i]
		r.Change = scaled(diffs[i], 1e3)
		// A row's noise is its own run-to-run spread, and some of the phase's: the
		// smallest ops swing by more than the floor and explain nothing, and a thread
		// preempted in the one graph traced moves any op by a few per cent.
		share := minShare
		if ofNodes && fewGraphs {
			share = fewGraphsShare
		}
		band := d.Floor*max(math.Abs(va[i]), math.Abs(vb[i])) + share*max(va[0], vb[0])
		r.Noise = 1e3 * band
		r.Beyond = stepsJudged && beyond(diffs[i], band)
		if total.Value != 0 {
			r.Share = diffs[i].Value / total.Value
		}
		return r
	}
	for gi, g := range groups {
		// The nodes split the graphs, by the traced graphs' shares.
		ofNodes := nodes && slices.ContainsFunc([]role{sa.roles[gi], sb.roles[gi]}, func(r role) bool { return r != roleEvery })
		if va[gi+1] != 0 || vb[gi+1] != 0 {
			d.Rows = append(d.Rows, row(g.row, gi+1, ofNodes))
		}
	}
	slices.SortStableFunc(d.Rows, func(x, y Row) int {
		return cmp.Or(cmp.Compare(math.Abs(y.Change.Value), math.Abs(x.Change.Value)), cmp.Compare(max(y.A, y.B), max(x.A, x.B)))
	})
	d.Rows = append(d.Rows, row(Row{Kind: "outside", Presence: "both"}, n-1, false))
	d.Moves = moves(groups)
	if !stepsJudged {
		d.Notes = append(d.Notes, fmt.Sprintf("%d and %d steps: under %d on a side, a change cannot be told from its spread", d.A.Steps, d.B.Steps, minBlocks))
	} else if nodes && fewGraphs {
		d.Notes = append(d.Notes, fmt.Sprintf("the ops' split rests on %d and %d traced steps, whose own spread is unknown: an op's change must pass %.0f%% of the phase's time as well to be beyond noise (trace more: nodes.mode all, or longer runs)",
			d.A.TracedSteps, d.B.TracedSteps, 100*fewGraphsShare))
	}
	return d
}

// minShare is the least part of the phase's time per unit a row's change must be,
// beyond its own floor, to be beyond noise; fewGraphsShare where the ops' split rests on
// fewer than minBlocks traced graphs on a side. A single traced graph, one of whose
// threads was preempted, put 2 ms (4% of a decode) on an ADD in one real pair, and the
// same on a SWIGLU in another.
const (
	minShare       = 0.01
	fewGraphsShare = 0.05
)

// minBlocks is the fewest blocks of a series whose spread the bootstrap measures: with
// one or two, every resample draws nearly the same.
const minBlocks = 3

func untraced(d PhaseDiff) string {
	switch {
	case d.A.TracedSteps == 0 && d.B.TracedSteps == 0:
		return "A and B"
	case d.A.TracedSteps == 0:
		return "A"
	}
	return "B"
}

func (ph *phaseFold) tokens() int64 {
	var n int64
	for _, b := range ph.steps.blocks {
		n += b.tokens
	}
	return n
}

// summarize sums a side's phase; the zero PhaseSide where it has none.
func summarize(ph *phaseFold, tokens bool) PhaseSide {
	var s PhaseSide
	if ph == nil {
		return s
	}
	s.Blocks, s.GraphBlocks, s.TracedSteps, s.Cold = len(ph.steps.blocks), len(ph.graphs.blocks), ph.graphs.n, ph.cold
	for _, b := range ph.steps.blocks {
		s.Steps += b.steps
		s.Tokens += b.tokens
		s.Seconds += b.seconds
	}
	units := float64(s.Steps)
	if tokens {
		units = float64(s.Tokens)
	}
	if units > 0 && s.Seconds > 0 {
		s.PerUnitMS = 1e3 * s.Seconds / units
		s.PerSecond = units / s.Seconds
	}
	return s
}

func scaled(e Estimate, f float64) Estimate {
	return Estimate{Value: e.Value * f, Low: e.Low * f, High: e.High * f}
}
