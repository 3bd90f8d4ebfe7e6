package summary

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
)

// A server computes every generating slot's next token in one decode, and a new
// request's prompt beside them: the decodes' spans say what each sequence did
// (llama.phase, and the tokens of each kind). This file folds that: decode steps by how
// many sequences they carried, the mixed decodes' tokens into their own phases, the slots
// and KV cells in use, and each request's gaps and time.

// Width is the decode steps that carried a number of sequences, one of schema.Widths.
type Width struct {
	Width     string    `json:"width"` // "1", "2", "3", "4", "5-8", …
	Steps     int64     `json:"steps"`
	Tokens    int64     `json:"tokens"`
	Seconds   float64   `json:"seconds"`
	Sequences float64   `json:"sequences"` // a step's, on average
	StepMS    Quantiles `json:"step_ms"`
	// TokenMS is a token's time: the median step's over its sequences.
	TokenMS float64 `json:"token_ms"`
	// Cost is the median step's time over a one-sequence step's: what a step of these
	// sequences costs against one of a single sequence, on this machine and build; 0
	// where there were no steps of one. Gain is the tokens a second it computes over a
	// one-sequence step's: Sequences / Cost, what batching buys.
	Cost float64 `json:"cost,omitempty"`
	Gain float64 `json:"gain,omitempty"`
}

// Serving is what a server's slots computed together: how many sequences its decodes
// carried, and its KV cache's cells against its context.
type Serving struct {
	// Steps are its decodes, Sequences the sequences they carried, summed, and MaxSequences
	// the most in one: Sequences/Steps is the slots in use, on average.
	Steps        int64 `json:"steps"`
	Sequences    int64 `json:"sequences"`
	MaxSequences int64 `json:"max_sequences"`
	// Slots is its context's n_seq_max, Context its n_ctx and SeqContext its n_ctx_seq
	// (the cells one sequence may hold), where the decodes' spans said them; 0 otherwise.
	Slots      int64 `json:"slots,omitempty"`
	Context    int64 `json:"context,omitempty"`
	SeqContext int64 `json:"seq_context,omitempty"`
	// KVCells is the most KV cells its sequences held at once, KVSeqCells the most one
	// held.
	KVCells    int64 `json:"kv_cells,omitempty"`
	KVSeqCells int64 `json:"kv_seq_cells,omitempty"`
	// NextPerSec is the next tokens computed a second of decoding (decode and mixed
	// steps' time), summed over the sequences: the throughput its clients share.
	NextPerSec float64 `json:"next_tokens_per_second,omitempty"`
}

// widthState is a width's decode steps.
type widthState struct {
	steps, tokens, seqs int64
	secs                float64
	hist                *logHistogram
}

// serving folds decode span s of phase name: its sequences, its tokens of each kind where
// it is mixed, its width where it is a decode, and the KV cells after it.
func (p *proc) serving(s ptrace.Span, name string, tokens int64) {
	attrs := s.Attributes()
	if schema.Bool(attrs, schema.ProfinferCut) {
		return
	}
	prompts, promptTokens := schema.Int(attrs, schema.LlamaBatchPromptSequences), schema.Int(attrs, schema.LlamaBatchPromptTokens)
	next, nextTokens := schema.Int(attrs, schema.LlamaBatchNextSequences), schema.Int(attrs, schema.LlamaBatchNextTokens)
	if prompts+next == 0 { // an older collector's span: one sequence, its phase by its tokens
		if name == decode {
			next, nextTokens = 1, tokens
		} else {
			prompts, promptTokens = 1, tokens
		}
	}
	sv := &p.serve
	sv.Steps++
	sv.Sequences += prompts + next
	sv.MaxSequences = max(sv.MaxSequences, prompts+next)
	sv.Slots = max(sv.Slots, schema.Int(attrs, schema.LlamaContextSequences))
	sv.Context = max(sv.Context, schema.Int(attrs, schema.LlamaContextSize))
	sv.SeqContext = max(sv.SeqContext, schema.Int(attrs, schema.LlamaContextSeqSize))
	kv := schema.Int(attrs, schema.LlamaKVCells)
	sv.KVCells = max(sv.KVCells, kv)
	sv.KVSeqCells = max(sv.KVSeqCells, schema.Int(attrs, schema.LlamaKVSeqCellsMax))
	secs := schema.Seconds(s)
	if name != prefill {
		p.nextTokens += nextTokens
		p.nextSecs += secs
	}
	sec := s.EndTimestamp().AsTime().Unix()
	p.addOccupancy(sec, prompts+next, kv)
	switch name {
	case mixed:
		ph := p.phase(mixed)
		ph.PromptTokens += promptTokens
		ph.NextTokens += nextTokens
		p.phase(prefill).MixedTokens += promptTokens
		p.phase(decode).MixedTokens += nextTokens
		p.addRate(sec, prefill, promptTokens)
		p.addRate(sec, decode, nextTokens)
	case decode:
		ph := p.phase(decode)
		w := ph.widths[schema.Width(int(max(next, 1)))]
		if w == nil {
			w = &widthState{hist: newLogHistogram()}
			ph.widths[schema.Width(int(max(next, 1)))] = w
		}
		w.steps++
		w.tokens += nextTokens
		w.seqs += max(next, 1)
		w.secs += secs
		w.hist.add(secs)
	}
}

// widthsView is a decode phase's steps by width, each against the steps of one sequence.
func (ph *phase) widthsView() []Width {
	var out []Width
	var one float64 // a one-sequence step's median, seconds
	if w := ph.widths[0]; w != nil {
		one = w.hist.quantile(0.5)
	}
	for i, w := range ph.widths {
		if w == nil {
			continue
		}
		seqs := float64(w.seqs) / float64(w.steps)
		median := w.hist.quantile(0.5)
		v := Width{Width: schema.Widths[i].Name, Steps: w.steps, Tokens: w.tokens, Seconds: w.secs, Sequences: seqs,
			StepMS: w.hist.quantiles(), TokenMS: 1e3 * median / seqs}
		if one > 0 {
			v.Cost = median / one
			v.Gain = seqs / v.Cost
		}
		out = append(out, v)
	}
	return out
}

// servingView is the process's Serving, nil where it computed no decode.
func (p *proc) servingView() *Serving {
	if p.serve.Steps == 0 {
		return nil
	}
	s := p.serve
	if p.nextSecs > 0 {
		s.NextPerSec = float64(p.nextTokens) / p.nextSecs
	}
	return &s
}

// addOccupancy counts a decode of seqs sequences, kv cells after it, into second sec.
func (p *proc) addOccupancy(sec, seqs, kv int64) {
	if i := p.rateAt(sec); i >= 0 {
		r := &p.rate[i]
		r.Steps++
		r.Sequences += seqs
		r.KVCells = max(r.KVCells, kv)
	}
}
