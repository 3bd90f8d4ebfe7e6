package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/profinfer/profinfer/internal/compare"
	"github.com/profinfer/profinfer/internal/summary"
)

// maxCompareRows bounds the rows printed per phase; the rest are summed on one line.
const maxCompareRows = 12

// Compare prints a comparison: what each side took, what makes them compare different
// things, what differs in the setup, then per phase the time per token on each side,
// the change with its interval and verdict, and the change split over the ops.
func Compare(w io.Writer, c *compare.Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "B against A")
	for _, s := range []compare.SideInfo{c.A, c.B} {
		fmt.Fprintf(tw, "  %s: %s: %s, %s to %s\n", s.Name, Text(s.Selection.Spec), Text(strings.Join(s.Processes, ", ")),
			s.First.Format("2006-01-02 15:04:05"), s.Last.Format("15:04:05"))
	}
	for _, warn := range c.Warnings {
		fmt.Fprintf(tw, "! %s\n", Text(warn))
	}
	setupLines(tw, c.Setup)
	for _, ph := range c.Phases {
		phaseLines(tw, ph)
	}
	fmt.Fprintf(tw, "\nintervals: %.0f%%, from %d resamples of each side's time-ordered blocks of steps and of traced graphs; beyond noise: the interval lies wholly beyond the phase's noise floor (what two runs of the same thing differ by) of the larger side's time, a row's beyond it of the row's and %.0f%% of the phase's (docs/compare.md)\n",
		100*c.Method.Confidence, c.Method.Resamples, 100*c.Method.MinShare)
	return tw.Flush()
}

// setupLines prints the items that differ (≠), that one side does not know (?) and the
// measured ones that differ within their tolerance (≈) as a table, and those the same
// on both, or unknown on both, a line each.
func setupLines(w io.Writer, items []compare.SetupItem) {
	var same, neither []string
	if slices.ContainsFunc(items, func(it compare.SetupItem) bool { return it.A != it.B }) {
		fmt.Fprintln(w, "\nsetup\tA\tB\t")
	} else {
		fmt.Fprintln(w, "\nsetup: nothing differs that both recordings say")
	}
	for _, it := range items {
		switch {
		case it.Differs:
			fmt.Fprintf(w, "≠ %s\t%s\t%s\t\n", it.Label, Text(it.A), Text(it.B))
		case it.A == it.B && it.A == "unknown":
			neither = append(neither, it.Label)
		case it.A == it.B:
			same = append(same, it.Label+" "+Text(it.A))
		case it.A == "unknown" || it.B == "unknown":
			fmt.Fprintf(w, "? %s\t%s\t%s\t\n", it.Label, Text(it.A), Text(it.B))
		default: // measured figures within their tolerance
			fmt.Fprintf(w, "≈ %s\t%s\t%s\t\n", it.Label, Text(it.A), Text(it.B))
		}
	}
	if len(same) > 0 {
		wrap(w, "the same on both: ", same, "; ")
	}
	if len(neither) > 0 {
		wrap(w, "unknown on both (older recordings lack them): ", neither, ", ")
	}
}

// wrap prints the items after head, joined by sep, in lines of about 100 characters.
func wrap(w io.Writer, head string, items []string, sep string) {
	line := head
	for i, it := range items {
		if i > 0 {
			line += strings.TrimRight(sep, " ")
			if len(line)+len(it) > 100 {
				fmt.Fprintln(w, line)
				line = "  "
			} else {
				line += " "
			}
		}
		line += it
	}
	fmt.Fprintln(w, line)
}

func phaseLines(w io.Writer, ph compare.PhaseDiff) {
	unit := ph.Unit
	fmt.Fprintf(w, "\n%s: ", ph.Phase)
	if ph.A.Steps == 0 || ph.B.Steps == 0 {
		fmt.Fprintf(w, "%s\n", ph.Verdict)
		notes(w, ph.Notes)
		return
	}
	fmt.Fprintf(w, "%s → %s ms a %s (%s ms, %s; interval %s … %s ms): %s (noise floor ±%.0f%%)\n",
		num(ph.A.PerUnitMS), num(ph.B.PerUnitMS), unit, signed(ph.Change.Value), percent(ph.Relative.Value),
		signed(ph.Change.Low), signed(ph.Change.High), verdict(ph), 100*ph.Floor)
	for _, s := range []struct {
		name string
		ps   compare.PhaseSide
	}{{"A", ph.A}, {"B", ph.B}} {
		cold := ""
		if s.ps.Cold > 0 {
			cold = fmt.Sprintf("; left out: %d, a new context's first (a warm-up, cold)", s.ps.Cold)
		}
		fmt.Fprintf(w, "  %s: %d %ss in %d steps, %.1f %ss/s; steps traced: %d%s\n",
			s.name, units(s.ps, unit), unit, s.ps.Steps, s.ps.PerSecond, unit, s.ps.TracedSteps, cold)
	}
	fmt.Fprintf(w, "  where the change went, largest first (ms a %s):\n", unit)
	fmt.Fprintln(w, "  backend\trow\tA\tB\tchange\tinterval\tshare\t\t")
	rows := ph.Rows[:len(ph.Rows)-1]
	shown := rows[:min(len(rows), maxCompareRows)]
	for _, r := range shown {
		rowLine(w, ph, r)
	}
	if rest := rows[len(shown):]; len(rest) > 0 {
		var sum float64
		for _, r := range rest {
			sum += r.Change.Value
		}
		more := "rows"
		if len(rest) == 1 {
			more = "row"
		}
		fmt.Fprintf(w, "  \t%d more %s\t\t\t%s\t\t\t\t\n", len(rest), more, signed(sum))
	}
	rowLine(w, ph, ph.Rows[len(ph.Rows)-1])
	for _, mv := range ph.Moves {
		fmt.Fprintf(w, "  moved from %s to %s: %d nodes", Text(summary.BackendName(mv.From)), Text(summary.BackendName(mv.To)), mv.Nodes)
		if len(mv.Layers) > 0 {
			fmt.Fprintf(w, " of layers %s", compare.Ranges(mv.Layers))
		}
		fmt.Fprintln(w, "; where the device timed no node, their time there is in its device work")
	}
	notes(w, ph.Notes)
}

func notes(w io.Writer, ns []string) {
	for _, n := range ns {
		fmt.Fprintf(w, "  note: %s\n", Text(n))
	}
}

func rowLine(w io.Writer, ph compare.PhaseDiff, r compare.Row) {
	share := "–"
	if ph.Beyond {
		share = fmt.Sprintf("%.0f%%", 100*r.Share)
	}
	mark := ""
	if r.Beyond {
		mark = "beyond noise"
	}
	split := slices.ContainsFunc(ph.Rows, func(r compare.Row) bool { return r.Kind == "op" && (r.BackendA == "CPU" || r.BackendB == "CPU") })
	fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s … %s\t%s\t%s\t\n", backendOf(r), Text(rowName(r, split)), cell(r.A, r.BackendA != "" || r.Kind == "outside"),
		cell(r.B, r.BackendB != "" || r.Kind == "outside"), signed(r.Change.Value), signed(r.Change.Low), signed(r.Change.High), share, mark)
}

// rowName is what a row computed: the op and its weights' type, which changed where
// two are named; split says the phase's CPU graphs are split by op.
func rowName(r compare.Row, split bool) string {
	switch r.Kind {
	case "device":
		return "device work (handing over to done)"
	case "copy":
		return "copies"
	case "graph":
		if split {
			return "graphs, outside their nodes"
		}
		return "graphs (not split by op)"
	case "outside":
		return "outside the graphs"
	}
	name := r.Op
	if name == compare.Undescribed {
		name = "nodes not described"
	}
	switch {
	case r.WeightA == r.WeightB && r.WeightA != "":
		name += " " + r.WeightA
	case r.Presence == "a" && r.WeightA != "":
		name += " " + r.WeightA
	case r.Presence == "b" && r.WeightB != "":
		name += " " + r.WeightB
	case r.WeightA != r.WeightB:
		name += fmt.Sprintf(" %s → %s", orNone(r.WeightA), orNone(r.WeightB))
	}
	switch r.Presence {
	case "a":
		name += " (only in A)"
	case "b":
		name += " (only in B)"
	}
	if r.ShapesDiffer > 0 {
		name += fmt.Sprintf(" (%d of %d shapes differ)", r.ShapesDiffer, r.Nodes)
	}
	return name
}

func backendOf(r compare.Row) string {
	switch {
	case r.Kind == "outside":
		return ""
	case r.Kind == "copy":
		from, to, _ := strings.Cut(cmp.Or(r.BackendA, r.BackendB), "→")
		return Text(summary.BackendName(from) + "→" + summary.BackendName(to))
	case r.Presence == "moved":
		return Text(summary.BackendName(r.BackendA) + " → " + summary.BackendName(r.BackendB))
	case r.BackendA != "":
		return Text(summary.BackendName(r.BackendA))
	}
	return Text(summary.BackendName(r.BackendB))
}

func orNone(w string) string {
	if w == "" {
		return "none"
	}
	return w
}

func verdict(ph compare.PhaseDiff) string {
	if ph.Beyond {
		return ph.Verdict + ", beyond noise"
	}
	return ph.Verdict
}

func units(ps compare.PhaseSide, unit string) int64 {
	if unit == "token" {
		return ps.Tokens
	}
	return ps.Steps
}

// cell is a row's ms on a side; a dash on a side it is absent from.
func cell(v float64, present bool) string {
	if !present {
		return "–"
	}
	return num(v)
}

// num prints ms to three significant digits: per-token times run from µs to seconds.
func num(v float64) string {
	a := math.Abs(v)
	if a == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', min(max(2-int(math.Floor(math.Log10(a))), 1), 6), 64)
}

func signed(v float64) string {
	if v > 0 {
		return "+" + num(v)
	}
	return num(v)
}

func percent(rel float64) string {
	return fmt.Sprintf("%+.1f%%", 100*rel)
}
