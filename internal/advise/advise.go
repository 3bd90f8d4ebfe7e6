// Package advise turns a process's measured figures into findings: what to change, each
// with the evidence it stands on. A rule fires only when its evidence is there, and is
// silent, not guessing, when the layer it needs is off. Each family of rules has a file of
// its own (cpu.go, roofline.go, offload.go, moe.go), each rule a Rule beside the function
// that applies it, and docs/findings.md's table is rendered from them.
package advise

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Rule is one finding's rule: its id, when it fires (the evidence it needs and its
// thresholds) and what it says, for the docs, and the function that applies it.
type Rule struct {
	ID    string
	Name  string // the finding's name in the docs
	Fires string // when it fires
	Says  string // what the finding says
	apply func(*summary.Process) (summary.Finding, bool)
}

// Rules are every rule, strongest first: the order findings are listed in.
var Rules = []Rule{
	oomRule, coldRule, idleRule, quotaRule, overCPUsRule, contentionRule, fewThreadsRule, simdRule, ubatchRule, recomputedRule, queuedRule, contextRule, stallRule, batchingRule, attentionRule, blockedRule, memoryBoundRule, barriersRule,
	deviceUnusedRule, fallbackRule, offloadRule, unevenRule, overheadRule,
}

// Annotate sets every process's findings.
func Annotate(v *summary.View) {
	for _, p := range v.Processes {
		p.Findings = Findings(p)
	}
}

// Findings applies every rule to p: warnings first, and among them those whose gain was
// estimated, the largest first, then the others strongest first.
func Findings(p *summary.Process) []summary.Finding {
	out := []summary.Finding{}
	for _, r := range Rules {
		if f, ok := r.apply(p); ok {
			if g := f.Gain; g != nil {
				f.Evidence = append(f.Evidence, gainText(g))
			}
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b summary.Finding) int {
		if a.Severity != b.Severity {
			return cmp.Compare(severity(a.Severity), severity(b.Severity))
		}
		return cmp.Compare(saved(b), saved(a))
	})
	return out
}

func severity(s summary.Severity) int {
	if s == summary.Warning {
		return 0
	}
	return 1
}

// saved is the seconds f's gain saves over the run; -1 where none was estimated.
func saved(f summary.Finding) float64 {
	if f.Gain == nil {
		return -1
	}
	return f.Gain.Saved
}

// gainText says what a finding's gain is, for its evidence.
func gainText(g *summary.Gain) string {
	if g.Per == summary.PerRequest {
		return fmt.Sprintf("without it, %s would be about %.0f ms a request instead of %.0f, %.1f s of the requests' time saved over the run; assumes %s",
			g.Phase, g.To, g.From, g.Saved, g.Assumes)
	}
	return fmt.Sprintf("without it, %s would take about %.1f ms a token instead of %.1f (%.1f× the tokens/s), %.1f s saved over the run; assumes %s",
		g.Phase, g.To, g.From, g.From/max(g.To, 1e-9), g.Saved, g.Assumes)
}

// phase returns p's phase of that name, if its figures are a verdict: its graphs' CPU
// time judged, and a graph traced node by node that did not run beside the collector's
// own work.
func phase(p *summary.Process, name string) *summary.Phase {
	for _, ph := range p.Phases {
		if ph.Name == name && judged(ph) {
			return ph
		}
	}
	return nil
}

func judged(ph *summary.Phase) bool {
	return ph.TracedGraphs > ph.TracedPerturbed && (ph.CPU == nil || ph.CPU.Judged)
}

// seen returns p's phase of that name, traced or not.
func seen(p *summary.Process, name string) *summary.Phase {
	for _, ph := range p.Phases {
		if ph.Name == name {
			return ph
		}
	}
	return nil
}

// decodes is the llama_decode calls p made, in every phase.
func decodes(p *summary.Process) int64 {
	var n int64
	for _, ph := range p.Phases {
		n += ph.Decodes
	}
	return n
}

// executable is the name of p's executable; "" where its resource does not say.
func executable(p *summary.Process) string {
	for _, kv := range p.Resource {
		if kv.Key == schema.ResourceProcessExecutableName {
			return kv.Value
		}
	}
	return ""
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func gb(x float64) string { return fmt.Sprintf("%.1f GB/s", x/1e9) }
