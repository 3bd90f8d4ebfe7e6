package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/profinfer/profinfer/internal/summary"
)

// Table prints, per process, where a token's time went by backend where it offloads;
// per phase, the op table: op and weight type, calls, total ms, mean µs, % of graph
// time, bound verdict and achieved rate; then the findings.
func Table(w io.Writer, v *summary.View) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(v.Processes) == 0 {
		fmt.Fprintln(tw, "no profiled process in the input")
	}
	for _, p := range v.Processes {
		fmt.Fprintf(tw, "%s\n", Text(p.Title))
		if p.Runtime != "" {
			fmt.Fprintf(tw, "runtime: %s\n", Text(p.Runtime))
		}
		if p.Model != "" {
			fmt.Fprintf(tw, "model: %s\n", Text(p.Model))
		}
		if r := p.Roofs; r.FLOPS > 0 {
			fmt.Fprintf(tw, "roofs: %s\n", roofs(r))
		}
		if l := p.Latency; l.Count > 0 {
			fmt.Fprintf(tw, "decode latency: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms over %d decodes\n", l.P50, l.P90, l.P99, l.Count)
		}
		if j := p.Jobs; j != nil {
			fmt.Fprintf(tw, "transcriptions: %d of %.1f s of audio in %.1f s; real-time factor p50 %.2f, p90 %.2f;"+
				" encoder %.2f s in %d passes, decoder %.2f s in %d passes\n", j.Count, j.AudioSeconds, j.Seconds, j.RTF.P50, j.RTF.P90,
				j.EncodeSeconds, j.EncodePasses, j.DecodeSeconds, j.DecodePasses)
		}
		if r := p.Requests; r != nil {
			fmt.Fprintf(tw, "requests: %d; time to first token p50 %.1f ms, p90 %.1f ms; per output token p50 %.1f ms, p90 %.1f ms;"+
				" %d prompt tokens computed, %d from the cache, %d generated; at most %d sequences in one decode\n",
				r.Count, r.TTFT.P50, r.TTFT.P90, r.TPOT.P50, r.TPOT.P90, r.Input, r.Cached, r.Output, r.MaxShared+1)
			if w := r.Wait; w != nil {
				fmt.Fprintf(tw, "waited between arriving and the first decode: p50 %.1f ms, p90 %.1f ms, at most %.1f ms, of %d requests whose arrival was seen\n",
					w.P50, w.P90, w.Max, w.Count)
			}
			requestLines(tw, r)
		}
		serving(tw, p)
		if q := p.Quota; q != nil {
			fmt.Fprintf(tw, "%s\n", quotaLine(q))
		}
		if e := p.End; e != nil {
			fmt.Fprintf(tw, "ended: %s\n", Text(e.Text))
		}
		lead(tw, p)
		offloads := summary.Offloads(p)
		for _, ph := range p.Phases {
			fmt.Fprintf(tw, "\n%s; %d graphs traced, %.1f ms%s\n", phaseLine(ph, summary.Steps(p.Runtime)),
				ph.TracedGraphs, ph.GraphSeconds*1e3, onCPU(ph.CPU))
			widths(tw, ph)
			if len(ph.Ops) == 0 {
				continue
			}
			if offloads {
				fmt.Fprintln(tw, "the CPU's part, by op (each backend's is above):")
			}
			fmt.Fprintln(tw, "op\tweight\tcalls\ttotal ms\tmean µs\t% graph\tbound\tachieved rate\t")
			for _, o := range ph.Ops {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.1f\t%.1f%%\t%s\t%s\t\n", Text(o.Op), Text(o.Weight), o.Calls, o.TotalMS, o.MeanUS,
					100*o.Share, Bound(o), Rate(o))
			}
			for _, o := range ph.Ops {
				if Noted(ph, o) {
					fmt.Fprintf(tw, "  %s %s: %s\n", Text(o.Op), Text(o.Weight), strings.TrimPrefix(Bound(o)+", "+o.Why, "not judged, "))
				}
			}
		}
		if len(p.Findings) > 0 {
			fmt.Fprintln(tw, "\nfindings:")
		}
		for _, f := range p.Findings {
			fmt.Fprintf(tw, "- %s\n  %s\n", f.Title, f.Advice)
			for _, e := range f.Evidence {
				fmt.Fprintf(tw, "    · %s\n", Text(e))
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// onCPU is a phase's threads' share of a CPU, for its heading, or why it is no verdict.
func onCPU(c *summary.ThreadsCPU) string {
	if c == nil {
		return ""
	}
	if !c.Judged {
		return "; threads on a CPU " + c.Thin
	}
	s := fmt.Sprintf("; threads on a CPU %.0f%% of the time of %d graphs", 100*c.Share, c.Graphs)
	if c.Starved {
		s += " (starved, " + lacked[c.Lacked] + ": ops are judged by that, not by their wall time)"
	}
	if c.Perturbed > 0 {
		s += fmt.Sprintf("; %d left out, run while profinfer attached or placed probes", c.Perturbed)
	}
	return s
}

// lacked says what starved threads lacked their CPUs for.
var lacked = map[string]string{summary.LackedCPU: "waiting for a CPU", summary.LackedDisk: "waiting for the disk", summary.LackedSleep: "asleep"}

// quotaLine says what CPU quota a process runs under and how often it was throttled.
func quotaLine(q *summary.Quota) string {
	s := fmt.Sprintf("CPU quota: %.2f CPUs (cgroup %s)", q.CPUs, Text(q.Cgroup))
	if q.Threads > 0 {
		s += fmt.Sprintf(" for %d threads", q.Threads)
	}
	if q.Periods > 0 {
		s += fmt.Sprintf("; throttled in %d of %d periods (%.0f%%), %.1f s held back", q.Throttled, q.Periods, 100*float64(q.Throttled)/float64(q.Periods), q.ThrottledSeconds)
		if q.SinceMade {
			s += ", since the cgroup was made"
		}
	}
	return s
}

func measured(at string) string {
	if at == "" {
		return ""
	}
	return ", " + Text(at)
}

// Bound is an op's verdict for a table's column: "not judged" where its evidence is
// too thin, the reason beside the table's.
func Bound(o *summary.Op) string {
	if o.Bound == "" && strings.HasPrefix(o.Why, "not judged") {
		return "not judged"
	}
	return orDash(o.Bound)
}

// Noted says whether an op's verdict gets its reason under the table: where profinfer
// does not know why it is slow, or knows for a reason of its own, what it checked or
// lacked; a reason the phase's line gives already is not repeated.
func Noted(ph *summary.Phase, o *summary.Op) bool {
	if o.Share < 0.01 || o.Why == "" || ph.CPU != nil && o.Why == ph.CPU.Thin {
		return false
	}
	return o.Bound == "" || o.Bound == summary.BoundUnexplained || o.Bound == summary.BoundSIMD
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// Rate is an op's achieved rate against the roof that bounds it, as the page shows it.
func Rate(o *summary.Op) string {
	if o.Roof == "" {
		return "–"
	}
	r := si(o.Bandwidth, "B/s")
	if o.Roof == summary.BoundCompute {
		r = si(o.FLOPS, "FLOP/s")
	}
	if o.PeakFrac > 0 {
		r += fmt.Sprintf(" (%.1f%% of roof)", 100*o.PeakFrac)
	}
	return r
}

// roofs says a process's roofs: compute by kernel class, then bandwidth by level, nearest
// first, each cache with its size.
func roofs(r summary.Roofs) string {
	s := fmt.Sprintf("%.1f GFLOP/s", r.FLOPS/1e9)
	if r.Int8 > 0 || r.BF16 > 0 {
		s += " (fp32)"
	}
	if r.Int8 > 0 {
		s += fmt.Sprintf(", %.1f Gop/s (int8)", r.Int8/1e9)
	}
	if r.BF16 > 0 {
		s += fmt.Sprintf(", %.1f GFLOP/s (bf16)", r.BF16/1e9)
	}
	memory := ""
	for _, c := range r.Caches {
		s += fmt.Sprintf(", %s (%d KiB) %.1f GB/s", Text(c.Name), c.Size>>10, c.Bandwidth/1e9)
		memory = "DRAM "
	}
	return s + fmt.Sprintf(", %s%.1f GB/s (%s%s)", memory, r.Bandwidth/1e9, Text(r.Source), measured(r.Measured))
}

func si(x float64, unit string) string {
	if x == 0 {
		return "–"
	}
	for _, s := range []struct {
		v float64
		p string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if x >= s.v {
			return fmt.Sprintf("%.1f %s%s", x/s.v, s.p, unit)
		}
	}
	return fmt.Sprintf("%.1f %s", x, unit)
}

// Text makes a string from the target safe for a terminal: control characters, escape
// sequences among them, are shown as Go escapes, so a model name cannot move the cursor
// or recolour the screen.
func Text(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) {
		return s
	}
	q := fmt.Sprintf("%+q", s)
	return q[1 : len(q)-1]
}
