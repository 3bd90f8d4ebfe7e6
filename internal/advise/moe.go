package advise

import (
	"fmt"

	"github.com/profinfer/profinfer/internal/summary"
)

// Mixtures of experts: how the router spreads tokens over the experts.

// A MoE layer whose expert selections vary this much (coefficient of variation).
const moeImbalance = 0.5

var unevenRule = Rule{
	ID:    "moe-uneven",
	Name:  "MoE uneven",
	Fires: "a layer's coefficient of variation of expert selections ≥ 0.5",
	Says:  "keep the hot experts in the fastest memory",
	apply: uneven,
}

// uneven: MoE routing concentrates on a few experts.
func uneven(p *summary.Process) (summary.Finding, bool) {
	var worst *summary.MoELayer
	n := 0
	for i := range p.MoE {
		l := &p.MoE[i]
		if l.Imbalance >= moeImbalance {
			n++
			if worst == nil || l.Imbalance > worst.Imbalance {
				worst = l
			}
		}
	}
	if worst == nil {
		return summary.Finding{}, false
	}
	var total, top int64
	for _, c := range worst.Selections {
		total += c
		top = max(top, c)
	}
	return summary.Finding{
		ID: "moe-uneven", Severity: summary.Info,
		Title:  "MoE routing is uneven",
		Advice: "A few experts take most tokens. Keep the hot experts in the fastest memory (or on the GPU when offloading experts), and expect throughput to follow the busiest expert.",
		Evidence: []string{
			fmt.Sprintf("%d of %d MoE layers with a coefficient of variation of %.1f or more", n, len(p.MoE), moeImbalance),
			fmt.Sprintf("layer %d: %.2f; its busiest expert took %s of %d selections", worst.Layer, worst.Imbalance, pct(float64(top)/float64(max(total, 1))), total),
		},
	}, true
}
