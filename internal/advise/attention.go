package advise

import (
	"fmt"
	"strings"

	"github.com/profinfer/profinfer/internal/summary"
)

// Attention: a query reads every cell of the KV cache before it, so a decode's attention
// grows with the context while the rest of the token stays as it was.

var attentionRule = Rule{
	ID:    "attention-long",
	Name:  "attention grows with the context",
	Fires: fmt.Sprintf("decode's attention (`FLASH_ATTN_EXT`, or with flash attention off its matmuls over the KV cache, `MUL_MAT KV …`, and `SOFT_MAX`) takes ≥ %.0f%% of its op time at a depth of %d KV cells or more (`ggml.graph.kv_cells`): information, a warning from %.0f%%", 100*attentionShare, longContext, 100*attentionWarn),
	Says:  "the attention's share, its time a token and how fast that grows with the depth, whether flash attention is on, and what slows the growth in the runtime's words: a quantised KV cache, flash attention (to compare: on a CPU it is not always faster), a shorter context",
	apply: longAttention,
}

// Thresholds of the attention rule.
const (
	attentionShare = 0.10
	attentionWarn  = 0.25
	longContext    = 512
)

// longAttention: decode spends a share of its time attending over a deep cache, a share
// that grows as the context fills.
func longAttention(p *summary.Process) (summary.Finding, bool) {
	ph := phase(p, "decode")
	if ph == nil || ph.KVCells < longContext || ph.Tokens == 0 {
		return summary.Finding{}, false
	}
	var share, total float64
	flash := false
	for _, o := range ph.Ops {
		total += o.Share
		switch {
		case o.Op == "FLASH_ATTN_EXT":
			flash = true
			share += o.Share
		case o.Op == "SOFT_MAX", o.Op == "MUL_MAT" && strings.HasPrefix(o.Weight, summary.KVPrefix):
			share += o.Share
		}
	}
	if total <= 0 || share/total < attentionShare {
		return summary.Finding{}, false
	}
	share /= total
	perToken := 1e3 * ph.DecodeSeconds / float64(ph.Tokens)
	attending := perToken * share
	f := summary.Finding{ID: "attention-long", Severity: "info",
		Title: fmt.Sprintf("Decode spends %s of its time attending over %d cached tokens", pct(share), ph.KVCells),
		Advice: fmt.Sprintf("Each token's query reads every cell of the KV cache before it, so this share grows as the context fills: %.1f ms a token now, some %.1f ms more for each 1000 tokens of context. ", attending, attending*1000/float64(ph.KVCells)) +
			"What slows its growth: a quantised KV cache (" + kvOption(p) + "), a shorter context or a conversation's history trimmed, and flash attention (" + flashOption(p) + "), which fuses the attention's steps but on a CPU is not always faster: run with it and compare (profinfer compare).",
		Evidence: []string{fmt.Sprintf("decode: the attention took %s of its op time, at a depth of %d KV cells", pct(share), ph.KVCells)},
		Gain: &summary.Gain{Phase: "decode", From: perToken, To: perToken - attending, Saved: attending * float64(ph.Tokens) / 1e3,
			Assumes: "a context of a few tokens: the attention's time grows with the depth, the rest of the token's does not"},
	}
	if share >= attentionWarn {
		f.Severity = "warning"
	}
	if flash {
		f.Evidence = append(f.Evidence, "flash attention on (FLASH_ATTN_EXT nodes)")
	} else {
		f.Title += ", flash attention off"
		f.Evidence = append(f.Evidence, "flash attention off: no FLASH_ATTN_EXT node; the attention's matmuls over the KV cache and SOFT_MAX instead")
	}
	return f, true
}

// flashOption names how p's runtime turns flash attention on.
func flashOption(p *summary.Process) string {
	switch {
	case p.Runtime == "ollama":
		return "OLLAMA_FLASH_ATTENTION=1 in the server's environment"
	case strings.HasPrefix(executable(p), "llama-"):
		return "-fa on"
	}
	return "flash_attn_type in llama_context_params, or the binding's flash attention option"
}

// kvOption names how p's runtime quantises its KV cache.
func kvOption(p *summary.Process) string {
	switch {
	case p.Runtime == "ollama":
		return "OLLAMA_KV_CACHE_TYPE=q8_0"
	case strings.HasPrefix(executable(p), "llama-"):
		return "-ctk q8_0 -ctv q8_0"
	}
	return "type_k and type_v q8_0 in llama_context_params"
}
