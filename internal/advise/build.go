package advise

import (
	"fmt"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/simd"
	"github.com/profinfer/profinfer/internal/summary"
)

// The build: what the CPU backend was compiled for, against the CPU it runs on.

var simdRule = Rule{
	ID:         "simd-narrow",
	Name:       "build narrower than the CPU",
	Reads:      []string{schema.ResourceGGMLCPUSIMD, schema.ResourceHostCPUSIMD, schema.GGMLRooflinePeakFraction},
	Fires:      "the CPU backend was built for narrower SIMD than the CPU has, and a judged op ran under {simdBelow} of its roof for it (the op table's `simd` verdict)",
	Says:       "the build's SIMD and the CPU's, the ops it held back and their share, and the build to run instead: a CPU variant or a native build; for Ollama, the runner's library",
	Thresholds: []*Threshold{simdBelow},
	apply:      narrowSIMD,
}

// simdBelow is the summary's: it gives the op its verdict.
var simdBelow = &Threshold{Name: "simdBelow", Value: summary.SIMDBelow, Unit: Share,
	Why: "The roof is measured with the widest vectors the CPU has, out of a narrower build's kernels' reach: a native build's decode matmuls stream their weights at some 60% of the bandwidth roof on the test bench's machines, a baseline build's at 10%. " +
		"A share of this machine's own roof (summary.SIMDBelow, which judges the op)."}

// narrowSIMD: the CPU backend leaves the CPU's wider vectors unused, and ops show it.
func narrowSIMD(p *summary.Process) (summary.Finding, bool) {
	s := p.SIMD
	if !simd.Narrower(s.Build, s.Host) {
		return summary.Finding{}, false
	}
	var held []string
	var worst *summary.Phase
	var share float64
	for _, ph := range p.Phases {
		var in float64
		for _, o := range ph.Ops {
			if o.Bound == summary.BoundSIMD {
				in += o.Share
				if name := o.Op + " " + o.Weight; !slices.Contains(held, name) {
					held = append(held, name)
				}
			}
		}
		if in > share {
			worst, share = ph, in
		}
	}
	if worst == nil {
		return summary.Finding{}, false
	}
	f := summary.Finding{Severity: summary.Warning,
		Title: fmt.Sprintf("The CPU backend was built for %s on a CPU with %s: its wider vectors sit unused", s.Build, s.Host),
		Advice: "ggml's matmul kernels are compiled per instruction set; a build for an older one computes each dot product in more, narrower steps. " +
			"Run a build for this CPU: llama.cpp built with GGML_NATIVE (the default) or with GGML_CPU_ALL_VARIANTS and GGML_BACKEND_DL, which loads the variant the CPU supports. " +
			"A virtual machine that hides the CPU's flags from its guest causes the same: pass the host's CPU model through.",
		Evidence: []string{
			fmt.Sprintf("ggml.cpu.simd %s, host.cpu.simd %s", s.Build, s.Host),
			fmt.Sprintf("%s: %s of its op time in ops under half their roof in this build (%s)", worst.Name, pct(share), strings.Join(held, ", ")),
			"gain not estimated: what a build for this CPU reaches is not measured here; run one and compare (profinfer compare)",
		},
	}
	if p.Runtime == "ollama" {
		f.Advice += " Ollama picks its CPU runner's library by the CPU's flags: a runner built without a CPU variant (a source build with `go build` alone, or OLLAMA_LLM_LIBRARY forcing one) computes with the baseline; use a release build, or build with cmake first."
	}
	return f, true
}
