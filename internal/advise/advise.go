// Package advise turns a process's measured figures into findings: what to change, each
// with the evidence it stands on. A rule fires only when its evidence is there, and is
// silent, not guessing, when the layer it needs is off. Each family of rules has a file of
// its own (cpu.go, roofline.go, offload.go, moe.go), each rule a Rule beside the function
// that applies it. A Rule is data as much as code: its thresholds are Thresholds that its
// function compares with and its Fires names ({name}), and the rules it gives way to are
// Defers that Findings applies, so docs/findings.md's tables are rendered from the values
// the code uses and cannot drift from them.
package advise

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Rule is one finding's rule: its id, when it fires and what it says, for the docs, its
// thresholds and the rules it gives way to, and the function that applies it. The function
// returns its finding without an id: Findings gives it the rule's.
type Rule struct {
	ID    string
	Name  string // the finding's name in the docs
	Fires string // when it fires, each threshold named as {Name}: FiresText writes them in
	Says  string // what the finding says, thresholds named as in Fires
	// Reads is the telemetry its evidence comes from, as profinfer emits it: span and
	// event names, their attributes, resource attributes and metrics. The texts name none.
	Reads []string
	// Thresholds are the limits the function compares with, package variables it reads.
	Thresholds []*Threshold
	DefersTo   []Defer // the rules whose findings leave its out
	apply      func(*summary.Process) (summary.Finding, bool)
}

// Threshold is one of a rule's limits: the value its code compares with, and the text
// its Fires and the docs render.
type Threshold struct {
	Name  string // how Fires refers to it: {Name}
	Value float64
	Unit  Unit   // how it is written
	Why   string // why this value, and why it holds on a slower or faster CPU than the test bench's
}

// Unit is how a threshold's value is written.
type Unit int

const (
	Share   Unit = iota // a part of a whole: 0.2 is 20%
	Ratio               // times another figure: 3×
	Seconds             // 0.5 s
	Number              // a count or another plain figure, whose noun the text gives: 8
	Tokens              // 32 tokens
	Cells               // the KV cache's: 512 KV cells
	Micro               // seconds written in µs: 5e-05 is 50 µs
)

// suffixes are what follows a value written as a plain number, by its unit.
var suffixes = map[Unit]string{Seconds: " s", Tokens: " tokens", Cells: " KV cells"}

// String writes t's value in its unit, as Fires and the docs show it.
func (t Threshold) String() string {
	switch t.Unit {
	case Share:
		return fmt.Sprintf("%.3g%%", 100*t.Value)
	case Ratio:
		return fmt.Sprintf("%.3g×", t.Value)
	case Micro:
		return fmt.Sprintf("%.3g µs", 1e6*t.Value)
	}
	return strconv.FormatFloat(t.Value, 'f', -1, 64) + suffixes[t.Unit]
}

// Defer is a rule another gives way to, as Alertmanager's inhibit rules: where that
// rule's finding is made and When holds, this rule's is left out.
type Defer struct {
	To string // the rule's id
	// When is, for the docs, what must hold beyond that finding's being made, the
	// deferring rule's thresholds named as in its Fires; "" for nothing.
	When string
	when func(p *summary.Process, made summary.Finding) bool // nil: always
}

// FiresText is when r fires, its thresholds written in.
func (r Rule) FiresText() string { return r.render(r.Fires) }

// render writes r's thresholds into text in place of their {Name}s.
func (r Rule) render(text string) string {
	var names []string
	for _, t := range r.Thresholds {
		names = append(names, "{"+t.Name+"}", t.String())
	}
	return strings.NewReplacer(names...).Replace(text)
}

// defers says whether r's finding gives way to one of those made.
func (r Rule) defers(p *summary.Process, made map[string]summary.Finding) bool {
	return slices.ContainsFunc(r.DefersTo, func(d Defer) bool {
		f, ok := made[d.To]
		return ok && (d.when == nil || d.when(p, f))
	})
}

// Rules are every rule, strongest first: the order findings are listed in.
var Rules = []Rule{
	oomRule, coldRule, idleRule, quotaRule, overCPUsRule, contentionRule, queuedThreadsRule, fewThreadsRule, simdRule, ubatchRule, recomputedRule, queuedRule, contextRule, stallRule, batchingRule, attentionRule, blockedRule, memoryBoundRule, barriersRule,
	deviceUnusedRule, fallbackRule, offloadRule, unevenRule, overheadRule,
}

// Annotate sets every process's findings.
func Annotate(v *summary.View) {
	for _, p := range v.Processes {
		p.Findings = Findings(p)
	}
}

// Findings applies every rule to p, then leaves out each finding whose rule gives way to
// one made, judged on the findings made before any was left out: warnings first, and among
// them those whose gain was estimated, the largest first, then the others strongest first.
func Findings(p *summary.Process) []summary.Finding {
	made := map[string]summary.Finding{}
	for _, r := range Rules {
		if f, ok := r.apply(p); ok {
			f.ID = r.ID
			made[r.ID] = f
		}
	}
	out := []summary.Finding{}
	for _, r := range Rules {
		f, ok := made[r.ID]
		if !ok || r.defers(p, made) {
			continue
		}
		if g := f.Gain; g != nil {
			f.Evidence = append(f.Evidence, gainText(g))
		}
		out = append(out, f)
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

// phase returns p's phase of that name, if its figures are a verdict: graphs enough, and
// a graph traced node by node that did not run beside the collector's own work. Their
// threads' CPU share may still be unresolved (graphs shorter than a scheduler tick): the
// rules that read it check ThreadsCPU.Judged.
func phase(p *summary.Process, name string) *summary.Phase {
	for _, ph := range p.Phases {
		if ph.Name == name && judged(ph) {
			return ph
		}
	}
	return nil
}

func judged(ph *summary.Phase) bool {
	return ph.TracedGraphs > ph.TracedPerturbed && (ph.CPU == nil || roofline.Enough(ph.CPU.Graphs, ph.CPU.ThreadSeconds))
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
