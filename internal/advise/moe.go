package advise

import (
	"fmt"
	"slices"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Mixtures of experts: how the router spreads tokens over the experts.

var moeImbalance = &Threshold{Name: "moeImbalance", Value: 0.5, Unit: Number,
	Why: "A MoE layer whose expert selections vary this much (their coefficient of variation: 0 is even routing) sends most tokens to a few experts, whose weights then set the pace. A figure of the router's choices, which no CPU's speed changes."}

var moeSelections = &Threshold{Name: "moeSelections", Value: 16, Unit: Number,
	Why: "The selections an expert a layer must have made, on average, to be judged: by chance alone, even routing's counts vary by √((E−1)/n) for n selections over E experts, under 0.25 (half of moeImbalance) from 16 an expert on. A short run's last layer, which routes one token a decode, has 20 over 8 experts at 20 decodes: some 0.59 from chance. A count, which no CPU's speed changes."}

var unevenRule = Rule{
	ID:         "moe-uneven",
	Name:       "MoE uneven",
	Reads:      []string{metadata.MetricsInfo.GgmlMoeExpertSelections.Name, schema.GGMLMoEExperts},
	Fires:      "a layer's coefficient of variation of expert selections ≥ {moeImbalance}, over {moeSelections} selections an expert or more",
	Says:       "keep the hot experts in the fastest memory",
	Thresholds: []*Threshold{moeImbalance, moeSelections},
	apply:      uneven,
}

// uneven: MoE routing concentrates on a few experts.
func uneven(p *summary.Process) (summary.Finding, bool) {
	var worst *summary.MoELayer
	var total int64 // the worst layer's selections
	n := 0
	for i := range p.MoE {
		l := &p.MoE[i]
		var sum int64
		for _, c := range l.Selections {
			sum += c
		}
		if float64(sum) < moeSelections.Value*float64(len(l.Selections)) {
			continue // what chance alone would give
		}
		if l.Imbalance >= moeImbalance.Value {
			n++
			if worst == nil || l.Imbalance > worst.Imbalance {
				worst, total = l, sum
			}
		}
	}
	if worst == nil {
		return summary.Finding{}, false
	}
	top := slices.Max(worst.Selections)
	return summary.Finding{
		Severity: summary.Info,
		Title:    "MoE routing is uneven",
		Advice:   "A few experts take most tokens. Keep the hot experts in the fastest memory (or on the GPU when offloading experts), and expect throughput to follow the busiest expert.",
		Evidence: []string{
			fmt.Sprintf("%d of %d MoE layers with a coefficient of variation of %.1f or more", n, len(p.MoE), moeImbalance.Value),
			fmt.Sprintf("layer %d: %.2f; its busiest expert took %s of %d selections", worst.Layer, worst.Imbalance, pct(float64(top)/float64(max(total, 1))), total),
		},
	}, true
}
