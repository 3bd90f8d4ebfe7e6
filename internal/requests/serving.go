package requests

import (
	"math"
	"math/bits"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
)

// Share is where a request's time went, between its first decode's start and its last
// decode's end: the decodes that carried it, by what they carried beside it; its context's
// decodes that did not carry it; and the time between its context's decodes, when the
// server samples, applies a grammar, sends tokens and reads new requests. They add up to
// the request's span; with its wait before, to its whole latency.
type Share int

const (
	TimePrompt       Share = iota // decodes computing its prompt
	TimeAlone                     // its next token, alone in the decode
	TimeBatched                   // its next token beside other sequences' next tokens
	TimeMixed                     // its next token beside other requests' prompts
	TimeOtherPrompts              // decodes without it that computed other requests' prompts
	TimeOtherDecodes              // decodes without it that computed others' next tokens
	TimeBetween                   // between its context's decodes
	Shares                        // how many there are
)

// shareNames are the Shares' names, as attributes and views call them.
var shareNames = [Shares]string{"prompt", "alone", "batched", "mixed", "other_prompts", "other_decodes", "between"}

func (s Share) String() string { return shareNames[s] }

// totals are what a context computed since it was first seen, so that a request's share
// of them between two of its decodes is a difference: what came between, at a cost per
// decode whatever the requests open.
type totals struct {
	prompt, next, between uint64 // ns: decodes with a prompt's tokens, decodes without, between decodes
	promptTokens          int
}

// context is a llama_context's sequences as its decodes show them.
type context struct {
	totals
	lastEnd uint64
	// cells are the KV cells each sequence holds: its highest position so far, plus one,
	// less what was removed since. Bounded by the context's sequences (LLAMA_MAX_SEQ).
	cells map[int32]int
	sum   int // cells summed
}

func (p *process) context(ctx uint64) *context {
	if p.ctxs == nil {
		p.ctxs = map[uint64]*context{}
	}
	c := p.ctxs[ctx]
	if c == nil {
		if len(p.ctxs) >= maxContexts {
			clear(p.ctxs) // a context per llama-bench test: the old ones are freed
		}
		c = &context{cells: map[int32]int{}}
		p.ctxs[ctx] = c
	}
	return c
}

// maxContexts bounds the contexts followed per process.
const maxContexts = 64

// maxCells bounds the sequences whose cells a context follows.
const maxCells = 1024

// mix is what step d's sequences did, carried[i] the request open on its i-th sequence
// (nil for one that starts a request): a sequence adds its next token where its request
// has an output already (a draft verified with it, too), or where it carries one token (a
// one-token prompt costs a token's decode). The tokens of sequences past those the probe
// summed are next tokens where every sequence summed was, prompt tokens otherwise. A
// decode with no sequence read is one sequence.
func mix(d *assemble.Step, carried []*Request) assemble.Mix {
	var m assemble.Mix
	seqs := d.Batch.Sequences()
	summed := 0
	for i, s := range seqs {
		summed += int(s.Tokens)
		if s.Tokens == 1 || (carried[i] != nil && carried[i].Output > 0) {
			m.NextSeqs++
			m.NextTokens += int(s.Tokens)
		} else {
			m.PromptSeqs++
			m.PromptTokens += int(s.Tokens)
		}
	}
	switch rest := d.Tokens - summed; {
	case len(seqs) == 0:
		return (&assemble.Step{Tokens: d.Tokens}).Mixed()
	case rest > 0 && m.PromptSeqs == 0:
		m.NextSeqs += rest
		m.NextTokens += rest
	case rest > 0:
		m.PromptTokens += rest
	}
	return m
}

// step follows decode d of c, which carried the requests carried: where the time since
// each one's previous decode went, this decode's time to each, and the KV cells its
// sequences hold after it. d.Mix is set.
func (c *context) step(d *assemble.Step, carried []*Request) {
	if c.lastEnd != 0 && d.Start > c.lastEnd {
		c.between += d.Start - c.lastEnd
	}
	dur := d.End - d.Start
	for _, r := range carried {
		if r.Decodes > 0 {
			r.Time[TimeOtherPrompts] += c.prompt - r.snap.prompt
			r.Time[TimeOtherDecodes] += c.next - r.snap.next
			r.Time[TimeBetween] += c.between - r.snap.between
		}
		switch {
		case r.Output == 0:
			r.Time[TimePrompt] += dur
		case d.Mix.PromptSeqs > 0:
			r.Time[TimeMixed] += dur
			r.MixedDecodes++
		case d.Mix.NextSeqs > 1:
			r.Time[TimeBatched] += dur
		default:
			r.Time[TimeAlone] += dur
		}
	}
	if d.Mix.PromptSeqs > 0 {
		c.prompt += dur
	} else {
		c.next += dur
	}
	c.promptTokens += d.Mix.PromptTokens
	c.lastEnd = max(c.lastEnd, d.End)
	for _, s := range d.Batch.Sequences() {
		if s.PosMax >= 0 {
			c.set(s.Seq, int(s.PosMax)+1)
		}
	}
	d.Mix.KVCells = c.sum
	for _, n := range c.cells {
		d.Mix.KVSeqMax = max(d.Mix.KVSeqMax, n)
	}
}

// set makes seq hold n cells.
func (c *context) set(seq int32, n int) {
	old, ok := c.cells[seq]
	if !ok && len(c.cells) >= maxCells {
		return
	}
	c.sum += n - old
	if n == 0 {
		delete(c.cells, seq)
		return
	}
	c.cells[seq] = n
}

// remove follows llama_memory_seq_rm(seq, p0, p1) in every context of p: the cells
// from p0 to p1 (to the end where p1 < 0) leave seq; seq < 0 is every sequence. A span
// removed inside the sequence is a context shift: its open requests count one.
func (p *process) remove(seq, p0, p1 int32) {
	p0 = max(p0, 0)
	for ctx, c := range p.ctxs {
		for s, n := range c.cells {
			if seq >= 0 && s != seq {
				continue
			}
			switch {
			case p1 < 0 || int(p1) >= n:
				c.set(s, min(n, int(p0)))
			case p1 > p0:
				c.set(s, n-int(p1-p0))
				if r := p.open[key{ctx, s}]; r != nil {
					r.Shifts++
				}
			}
		}
	}
}

// Gaps counts a request's gaps between output tokens on a log scale, a quarter octave a
// bucket from 64 µs: a median to within 9%, in a fixed size whatever the output's length.
type Gaps struct {
	n      uint32
	counts [gapBuckets]uint32
}

const (
	gapBuckets = 4 * 28 // 64 µs to some 4.8 hours
	gapFloor   = 64_000 // ns
)

// Add counts a gap of ns nanoseconds.
func (g *Gaps) Add(ns uint64) {
	g.n++
	g.counts[gapBucket(ns)]++
}

func gapBucket(ns uint64) int {
	if ns < gapFloor {
		return 0
	}
	x := float64(ns) / gapFloor
	octave := 63 - bits.LeadingZeros64(ns/gapFloor)
	quarter := int(4 * (math.Log2(x) - float64(octave)))
	return min(4*octave+min(quarter, 3)+1, gapBuckets-1)
}

// Median returns the median gap, ns: its bucket's geometric middle; 0 without gaps.
func (g *Gaps) Median() uint64 {
	if g.n == 0 {
		return 0
	}
	seen := uint32(0)
	for i, c := range g.counts {
		seen += c
		if 2*seen >= g.n {
			if i == 0 {
				return gapFloor / 2
			}
			return uint64(gapFloor * math.Exp2((float64(i-1)+0.5)/4))
		}
	}
	return 0
}

// Phase is step d's phase read from its batch alone, before the requests it carried are
// followed: as its Mix will say, but where a sequence verifies a draft.
func Phase(d *assemble.Step) string {
	var none [events.MaxSeqs]*Request
	return mix(d, none[:d.Batch.N]).Phase()
}
