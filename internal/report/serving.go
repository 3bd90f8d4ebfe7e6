package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/profinfer/profinfer/internal/summary"
)

// serving prints, for a process whose decodes carried several sequences, what its slots
// computed together: the sequences a decode, the next tokens a second summed over them,
// the KV cells in use against the context.
func serving(w io.Writer, p *summary.Process) {
	s := p.Serving
	if s == nil || s.MaxSequences < 2 {
		return
	}
	line := fmt.Sprintf("serving: %d decodes carried %.1f sequences on average, %d at most", s.Steps,
		float64(s.Sequences)/float64(s.Steps), s.MaxSequences)
	if s.Slots > 0 {
		line += fmt.Sprintf(", of %d slots", s.Slots)
	}
	if s.NextPerSec > 0 {
		line += fmt.Sprintf("; %.1f next tokens a second of decoding, summed over the sequences", s.NextPerSec)
	}
	fmt.Fprintln(w, line)
	if s.KVCells > 0 {
		line = "KV cache: at most " + cells(s.KVCells, s.Context) + " in use"
		if s.SeqContext > 0 && s.SeqContext < s.Context {
			line += ", one sequence at most " + cells(s.KVSeqCells, s.SeqContext) + " (its slot's share)"
		}
		fmt.Fprintln(w, line)
	}
}

// cells says n cells of max, with the share where max is known.
func cells(n, max int64) string {
	if max <= 0 {
		return fmt.Sprintf("%d cells", n)
	}
	return fmt.Sprintf("%d of %d cells (%.0f%%)", n, max, 100*float64(n)/float64(max))
}

// widths prints a decode phase's steps by the sequences each carried, each against a
// step of one: what batching buys on this machine and build.
func widths(w io.Writer, ph *summary.Phase) {
	if len(ph.Widths) < 2 && (len(ph.Widths) == 0 || ph.Widths[0].Width == "1") {
		return
	}
	fmt.Fprintln(w, "sequences a step\tsteps\tstep p50 ms\tstep p90 ms\ta token ms\tcost against one\ttokens/s against one\t")
	for _, x := range ph.Widths {
		cost, gain := "–", "–"
		if x.Cost > 0 {
			cost, gain = fmt.Sprintf("%.2f×", x.Cost), fmt.Sprintf("%.2f×", x.Gain)
		}
		fmt.Fprintf(w, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", x.Width, x.Steps, x.StepMS.P50, x.StepMS.P90, x.TokenMS, cost, gain)
	}
}

// phaseLine is a phase's heading: its tokens and steps, and where a server computed
// prompts beside other sequences' next tokens, the tokens of each kind.
func phaseLine(ph *summary.Phase, steps string) string {
	switch {
	case ph.Name == "mixed":
		return fmt.Sprintf("mixed: %d %s, %.1f ms, each a prompt's chunk beside other sequences' next tokens: %d prompt tokens, %d next tokens",
			ph.Decodes, steps, ph.DecodeSeconds*1e3, ph.PromptTokens, ph.NextTokens)
	case ph.Tokens > 0:
		s := fmt.Sprintf("%s: %d tokens in %d %s, %.1f tokens/s", ph.Name, ph.Tokens, ph.Decodes, steps, ph.TokensPerSec)
		if ph.MixedTokens > 0 {
			s += fmt.Sprintf(" (and %d more in mixed %s)", ph.MixedTokens, steps)
		}
		return s
	}
	return fmt.Sprintf("%s: %d %s, %.1f ms", ph.Name, ph.Decodes, steps, ph.DecodeSeconds*1e3)
}

// requestLines prints, for requests that generated, their gaps between output tokens and
// where their latency went.
func requestLines(w io.Writer, r *summary.Requests) {
	if g := r.GapMedian; g.Count > 0 {
		line := fmt.Sprintf("gaps between a request's output tokens: its median p50 %.1f ms; its longest p50 %.1f ms, p90 %.1f ms, at most %.1f ms",
			g.P50, r.GapMax.P50, r.GapMax.P90, r.GapMax.Max)
		if r.Stalled > 0 {
			line += fmt.Sprintf("; %d of %d requests stalled %.0f× their median or more by other requests' prompts (%d prompt tokens)",
				r.Stalled, g.Count, summary.StallRatio, r.StallPrompts)
		}
		fmt.Fprintln(w, line)
	}
	if len(r.Time) > 0 && r.Latency > 0 {
		var parts []string
		for _, t := range r.Time {
			if t.Seconds > 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f%%", shareName[t.Name], 100*t.Seconds/r.Latency))
			}
		}
		fmt.Fprintf(w, "where the requests' latency went (%.2f s in all): %s\n", r.Latency, strings.Join(parts, ", "))
	}
	if r.Full > 0 {
		line := fmt.Sprintf("context: %d requests reached the cells one sequence may hold", r.Full)
		if r.Truncated > 0 {
			line += fmt.Sprintf(", %d of them cut there", r.Truncated)
		}
		if r.Shifts > 0 {
			line += fmt.Sprintf("; %d context shifts", r.Shifts)
		}
		fmt.Fprintln(w, line)
	}
}

// shareName says a share of a request's latency in words.
var shareName = map[string]string{
	"wait":          "waiting for a slot",
	"prompt":        "its prompt",
	"alone":         "its next token alone",
	"batched":       "beside other sequences' next tokens",
	"mixed":         "beside other requests' prompts",
	"other_prompts": "other requests' prompts without it",
	"other_decodes": "other sequences' next tokens without it",
	"between":       "between decodes (sampling, grammar, sending)",
}
