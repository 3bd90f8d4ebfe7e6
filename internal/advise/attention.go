package advise

import (
	"fmt"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Attention: a query reads every cell of the KV cache before it, so a decode's attention
// grows with the context while the rest of the token stays as it was.

var attentionRule = Rule{
	ID:    "attention-long",
	Name:  "attention grows with the context",
	Reads: []string{schema.GGMLGraphKVCells, schema.GGMLOp, schema.SpanDecode},
	Fires: "decode's attention (`FLASH_ATTN_EXT`, or with flash attention off its matmuls over the KV cache, `MUL_MAT KV …`, and `SOFT_MAX`) takes ≥ {attentionShare} of a traced decode graph's time at a depth of {longContext} or more, " +
		"the deepest traced one, which must reach {deepestShare} of the depth of the phase's deepest decode (sampling windows trace a decode at each depth band); information, a warning from {attentionWarn}",
	Says:       "the attention's share at the depth traced, its time a token and how fast that grows with the depth (the line through every one-token decode's time against its depth, traced or not, where they span {depthRange} or more), whether flash attention is on, and what slows the growth in the runtime's words: a quantised KV cache, flash attention (to compare: on a CPU it is not always faster), a shorter context",
	Thresholds: []*Threshold{attentionShare, longContext, deepestShare, attentionWarn, depthRange},
	apply:      longAttention,
}

// Thresholds of the attention rule, each of the same graph's or the same phase's figures,
// which a faster or slower CPU scales alike.
var (
	attentionShare = &Threshold{Name: "attentionShare", Value: 0.1, Unit: Share,
		Why: "The attention's share of a deep decode graph's time from which it is said: under a tenth, a shorter context or a quantised cache would buy the token little. A share of the same graph's time."}
	attentionWarn = &Threshold{Name: "attentionWarn", Value: 0.25, Unit: Share,
		Why: "The share from which it is a warning: a quarter of each token's time, and growing as the context fills. A share of the same graph's time."}
	longContext = &Threshold{Name: "longContext", Value: 512, Unit: Cells,
		Why: "The depth from which a decode's attention is judged: a context shorter than this is rarely the one to shorten, and its attention rarely a tenth of the token. " +
			"A depth, not a time: how much of the token the attention takes is attentionShare's to judge."}
	depthRange = &Threshold{Name: "depthRange", Value: summary.MinDepthRange, Unit: Cells,
		Why: "The depths the one-token decodes must span for the line through their times to say how a token grows with depth (summary.MinDepthRange, which fits it): a token's time spreads by some 10% graph to graph, and fewer cells add as little. " +
			"Cells, not time: the line's slope is in this run's own milliseconds."}
	deepestShare = &Threshold{Name: "deepestShare", Value: 0.5, Unit: Share,
		Why: "The deepest traced decode must reach this share of the depth of the phase's deepest decode to stand for the phase: a graph traced shallower (llama-bench's warm-up token at depth 0 beside its decodes at 2048) understates the attention of the decodes the phase is made of. " +
			"A share of depths, not of time."}
)

// longAttention: decode spends a share of its time attending over a deep cache, a share
// that grows as the context fills. It is read from the deepest traced decode graph, not
// from the phase's op table, which blends every depth traced (llama-bench's warm-up
// token at depth 0 beside its decodes at 2048); where the traced graphs fall short of
// half the phase's deepest decode, they do not stand for it, and nothing is said.
func longAttention(p *summary.Process) (summary.Finding, bool) {
	ph := phase(p, "decode")
	if ph == nil || ph.Tokens == 0 || ph.Deepest == nil {
		return summary.Finding{}, false
	}
	d := ph.Deepest
	if float64(d.Cells) < longContext.Value || float64(d.Cells) < deepestShare.Value*float64(ph.MaxCells) || d.Seconds <= 0 {
		return summary.Finding{}, false
	}
	share := d.Attention / d.Seconds
	if share < attentionShare.Value {
		return summary.Finding{}, false
	}
	flash := slices.ContainsFunc(ph.Ops, func(o *summary.Op) bool { return o.Op == "FLASH_ATTN_EXT" })
	perToken := 1e3 * ph.DecodeSeconds / float64(ph.Tokens)
	attending := perToken * share
	// How fast it grows: the line through every one-token decode's time against its depth
	// where they spread over enough of it, else the traced graph's attention over its depth.
	growth, grown := attending*1000/float64(d.Cells), "in proportion to the depth, from the traced graph"
	if fit := ph.Depth; fit != nil && fit.MSPer1k > 0 {
		growth, grown = fit.MSPer1k, fmt.Sprintf("fitted over %d decodes from %d to %d cells deep", fit.Graphs, fit.From, fit.To)
	}
	f := summary.Finding{Severity: summary.Info,
		Title: fmt.Sprintf("Decode spends %s of its time attending over %d cached tokens", pct(share), d.Cells),
		Advice: fmt.Sprintf("Each token's query reads every cell of the KV cache before it, so this share grows as the context fills: %.1f ms a token now, some %.1f ms more for each 1000 tokens of context. ", attending, growth) +
			"What slows its growth: a quantised KV cache (" + kvOption(p) + "), a shorter context or a conversation's history trimmed, and flash attention (" + flashOption(p) + "), which fuses the attention's steps but on a CPU is not always faster: run with it and compare (profinfer compare).",
		Evidence: []string{fmt.Sprintf("decode: the attention took %s of a traced graph %d KV cells deep (%.1f of its %.1f ms); the phase's decodes reached %d cells",
			pct(share), d.Cells, 1e3*d.Attention, 1e3*d.Seconds, ph.MaxCells),
			fmt.Sprintf("decode: %.2f ms a token more for each 1000 cells, %s", growth, grown)},
		Gain: &summary.Gain{Phase: "decode", From: perToken, To: perToken - attending, Saved: attending * float64(ph.Tokens) / 1e3,
			Assumes: "a context of a few tokens: the attention's time grows with the depth, the rest of the token's does not"},
	}
	if share >= attentionWarn.Value {
		f.Severity = summary.Warning
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
