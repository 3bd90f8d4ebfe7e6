package advise

import (
	"fmt"
	"strings"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Batching: how the runtime feeds its prompt to the graphs. llama_decode computes a batch
// n_ubatch tokens a graph, and each graph reads every weight once: a small ubatch reads
// the weights again for every few tokens of a prompt.

var ubatchRule = Rule{
	ID:         "ubatch-small",
	Name:       "small ubatch",
	Reads:      []string{schema.LlamaBatchTokens, schema.LlamaContextUbatchSize, schema.LlamaPhase},
	Fires:      "a prefill decode carried at least {ubatches} ubatches (its tokens ≥ {ubatches} × the ubatch size) of {smallUbatch} or fewer",
	Says:       "the ubatch, the tokens a prefill decode carried and the graphs that took, how far the prefill's matmuls were from their roof where traced, and the setting in the runtime's words (`-ub`/`-b`, `n_ubatch`, `num_batch`)",
	Thresholds: []*Threshold{ubatches, smallUbatch},
	apply:      smallUbatches,
}

// Thresholds of the ubatch rule.
var (
	smallUbatch = &Threshold{Name: "smallUbatch", Value: 32, Unit: Tokens,
		Why: "The largest ubatch the rule calls small: bindings default to 8 to 128, llama.cpp's tools to 512, and a prompt's matmuls reach their roofs from some 64 up. " +
			"The tokens that share each reading of a weight, which set the matmuls' share of their roof on a slower or faster CPU alike."}
	ubatches = &Threshold{Name: "ubatches", Value: 2, Unit: Number,
		Why: "The ubatches a prompt's decode must have carried: a prompt that fits one was not split by the ubatch, and a larger one would not change it. A count, whatever the CPU."}
)

// batchOption names how p's runtime is told its ubatch, set to n.
func batchOption(p *summary.Process, n int) string {
	switch {
	case p.Runtime == "ollama":
		return fmt.Sprintf("num_batch %d (PARAMETER num_batch in the Modelfile, or options.num_batch in the request)", n)
	case strings.HasPrefix(executable(p), "llama-"):
		return fmt.Sprintf("-ub %d (--ubatch-size, with -b at least as large)", n)
	}
	return fmt.Sprintf("n_ubatch %d (and n_batch at least as large) in llama_context_params, or the binding's batch size option", n)
}

// smallUbatches: prompts computed a few tokens a graph.
func smallUbatches(p *summary.Process) (summary.Finding, bool) {
	ph := seen(p, "prefill")
	if ph == nil || ph.Ubatch == 0 || float64(ph.Ubatch) > smallUbatch.Value || float64(ph.MaxBatch) < ubatches.Value*float64(ph.Ubatch) {
		return summary.Finding{}, false
	}
	graphs := (ph.MaxBatch + ph.Ubatch - 1) / ph.Ubatch
	f := summary.Finding{Severity: summary.Warning,
		Title: fmt.Sprintf("Prompts computed %d tokens a graph: a ubatch of %d", ph.Ubatch, ph.Ubatch),
		Advice: "llama_decode computes a prompt n_ubatch tokens a graph, and each graph reads every weight of the model once, so a small ubatch reads the weights again every few tokens and keeps the matmuls from their compute roof. " +
			fmt.Sprintf("Run with %s, if the memory allows its larger compute buffer.", batchOption(p, 512)),
		Evidence: []string{fmt.Sprintf("prefill: a decode of %d tokens took %d graphs of %d (llama.context.ubatch_size)", ph.MaxBatch, graphs, ph.Ubatch)},
	}
	if judged(ph) {
		var share, frac float64
		for _, o := range ph.Ops {
			if o.Op == "MUL_MAT" && o.PeakFrac > 0 {
				share += o.Share
				frac += o.Share * o.PeakFrac
			}
		}
		if share > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("prefill: its matmuls, %s of its op time, reached %s of their roof", pct(share), pct(frac/share)))
		}
	}
	f.Evidence = append(f.Evidence, "gain not estimated: what a larger ubatch reaches depends on the kernels a build picks for it; run with it and compare (profinfer compare)")
	return f, true
}
