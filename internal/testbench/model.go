package testbench

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/profinfer/profinfer/internal/gguf"
)

// Shape is the hyperparameters of a synthetic llama-architecture model.
type Shape struct {
	Name       string
	Embd       uint64
	Layers     int
	FF         uint64 // per expert when Experts > 0
	Heads      uint32
	KVHeads    uint32
	Vocab      int
	Context    uint32
	Experts    uint32 // 0 for a dense model
	ExpertsUse uint32
	Router     Router // how a MoE model's router picks its experts
}

// Router is how a synthetic MoE model's router (ffn_gate_inp) spreads the tokens.
type Router int

const (
	// RouterTied has every expert's row the same (ones, as the norms): the logits tie,
	// and every token goes to the same experts.
	RouterTied Router = iota
	// RouterRandom has random rows, and the experts share the tokens about evenly. Its
	// model's layers write nothing back to the residual stream (attn_output and
	// ffn_down_exps are zeros), so each token reaches every router as its own embedding:
	// with random weights a layer's output is much the same for every token, and a random
	// router then sends all tokens alike (a coefficient of variation of 1.43, measured).
	RouterRandom
	// RouterHot is RouterRandom with the first two experts favoured: every token
	// embedding holds hotEmbedding in its first dimension, which only their rows weigh,
	// so their logits lead the others' by about one and a half times a logit's spread,
	// and they take about a third of the tokens each.
	RouterHot
)

// Shapes are the models the test bench writes, by name.
var Shapes = map[string]Shape{
	// A Llama-3.2-1B-class shape.
	"llama-1b": {Name: "llama-1b", Embd: 2048, Layers: 16, FF: 8192, Heads: 32, KVHeads: 8, Vocab: 32000, Context: 4096},
	// A small body under a Llama-3-sized vocabulary (128 256 tokens): sampling, a grammar
	// or n_probs over its logits cost milliseconds a token, a fair share of a decode.
	"llama-128k": {Name: "llama-128k", Embd: 512, Layers: 4, FF: 2048, Heads: 8, KVHeads: 8, Vocab: 128256, Context: 4096},
	// A mixture of experts of similar per-token cost: 8 experts, 2 used per token.
	"moe": {Name: "moe", Embd: 2048, Layers: 12, FF: 2048, Heads: 32, KVHeads: 8, Vocab: 32000, Context: 4096, Experts: 8, ExpertsUse: 2},
	// Small mixtures whose routing is what they are for: even, and two experts favoured.
	"moe-even": {Name: "moe-even", Embd: 512, Layers: 4, FF: 512, Heads: 8, KVHeads: 8, Vocab: 4096, Context: 4096, Experts: 8, ExpertsUse: 2, Router: RouterRandom},
	"moe-hot":  {Name: "moe-hot", Embd: 512, Layers: 4, FF: 512, Heads: 8, KVHeads: 8, Vocab: 4096, Context: 4096, Experts: 8, ExpertsUse: 2, Router: RouterHot},
	// Deep and narrow: a token is some 2 000 nodes of microseconds each, graphs of
	// milliseconds whose time is the nodes' dispatch and barriers, not their work.
	"deep-narrow": {Name: "deep-narrow", Embd: 128, Layers: 128, FF: 256, Heads: 4, KVHeads: 4, Vocab: 4096, Context: 4096},
}

// The constant every token embedding of a RouterHot model holds in its first dimension,
// and the first two router rows' weight on it. Random weights are within ±0.035 (a spread
// of 0.02), so a random row's logit spreads 0.02 × 0.02 × √511 ≈ 0.009 over the
// embedding's other dimensions, and the favoured rows lead by 0.27 × 0.05 ≈ 1.5 times it.
const (
	hotEmbedding = 0.27
	hotRouter    = 0.05
)

// WriteModel writes s as an F16 GGUF file with random weights. Random weights exercise the
// same kernels, shapes and types as trained ones; only the generated text is meaningless.
func WriteModel(path string, s Shape, seed uint64) error {
	f := &gguf.File{KV: s.metadata()}
	f.Tensors = s.tensors()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := newWeights(seed)
	err = gguf.Write(out, f, func(i int, w io.Writer) error {
		t := f.Tensors[i]
		router := strings.HasSuffix(t.Name, ".ffn_gate_inp.weight")
		switch {
		case router && s.Router != RouterTied:
			return rng.writeRouter(w, t.Shape[0], t.Shape[1], s.Router == RouterHot)
		case t.Type == gguf.F32: // norms: ones, as initialised in training
			return writeOnes(w, t.Elements())
		case t.Name == "token_embd.weight" && s.Router == RouterHot:
			return rng.writeF16Rows(w, t.Shape[0], t.Shape[1], hotEmbedding)
		case s.Router != RouterTied && (strings.HasSuffix(t.Name, ".attn_output.weight") || strings.HasSuffix(t.Name, ".ffn_down_exps.weight")):
			_, err := w.Write(make([]byte, 2*t.Elements())) // F16 zeros
			return err
		}
		return rng.writeF16(w, t.Elements())
	})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s Shape) metadata() []gguf.KV {
	kv := []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: "profinfer " + s.Name + " (random weights)"},
		{Key: "general.file_type", Value: uint32(1)}, // MOSTLY_F16
		{Key: "llama.context_length", Value: s.Context},
		{Key: "llama.embedding_length", Value: uint32(s.Embd)},
		{Key: "llama.block_count", Value: uint32(s.Layers)},
		{Key: "llama.feed_forward_length", Value: uint32(s.FF)},
		{Key: "llama.attention.head_count", Value: s.Heads},
		{Key: "llama.attention.head_count_kv", Value: s.KVHeads},
		{Key: "llama.rope.dimension_count", Value: uint32(s.Embd) / s.Heads},
		{Key: "llama.rope.freq_base", Value: float32(500000)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
		{Key: "llama.vocab_size", Value: uint32(s.Vocab)},
	}
	if s.Experts > 0 {
		kv = append(kv,
			gguf.KV{Key: "llama.expert_count", Value: s.Experts},
			gguf.KV{Key: "llama.expert_used_count", Value: s.ExpertsUse})
	}
	return append(kv, Vocabulary(s.Vocab)...)
}

func (s Shape) tensors() []gguf.TensorInfo {
	headDim := s.Embd / uint64(s.Heads)
	kvDim := headDim * uint64(s.KVHeads)
	ts := []gguf.TensorInfo{
		{Name: "token_embd.weight", Type: gguf.F16, Shape: []uint64{s.Embd, uint64(s.Vocab)}},
		{Name: "output_norm.weight", Type: gguf.F32, Shape: []uint64{s.Embd}},
		{Name: "output.weight", Type: gguf.F16, Shape: []uint64{s.Embd, uint64(s.Vocab)}},
	}
	for i := 0; i < s.Layers; i++ {
		blk := func(name string, typ gguf.TensorType, shape ...uint64) {
			ts = append(ts, gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.%s.weight", i, name), Type: typ, Shape: shape})
		}
		blk("attn_norm", gguf.F32, s.Embd)
		blk("attn_q", gguf.F16, s.Embd, s.Embd)
		blk("attn_k", gguf.F16, s.Embd, kvDim)
		blk("attn_v", gguf.F16, s.Embd, kvDim)
		blk("attn_output", gguf.F16, s.Embd, s.Embd)
		blk("ffn_norm", gguf.F32, s.Embd)
		if s.Experts == 0 {
			blk("ffn_gate", gguf.F16, s.Embd, s.FF)
			blk("ffn_down", gguf.F16, s.FF, s.Embd)
			blk("ffn_up", gguf.F16, s.Embd, s.FF)
			continue
		}
		n := uint64(s.Experts)
		blk("ffn_gate_inp", gguf.F32, s.Embd, n)
		blk("ffn_gate_exps", gguf.F16, s.Embd, s.FF, n)
		blk("ffn_down_exps", gguf.F16, s.FF, s.Embd, n)
		blk("ffn_up_exps", gguf.F16, s.Embd, s.FF, n)
	}
	return ts
}

// Vocabulary returns the tokenizer metadata of a synthetic SentencePiece-style vocabulary
// of n tokens that llama.cpp's tokenizer accepts: <unk>, <s>, </s>, the 256 byte tokens,
// then filler pieces ("▁a", "a", "▁b", …, "▁ab", …) up to n.
func Vocabulary(n int) []gguf.KV {
	const (
		normal  = 1
		unknown = 2
		control = 3
		byteTok = 6
	)
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{unknown, control, control}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, byteTok)
	}
	for l := 1; len(tokens) < n; l++ {
		for _, w := range words(l) {
			for _, piece := range []string{"▁" + w, w} {
				if len(tokens) < n {
					tokens = append(tokens, piece)
					types = append(types, normal)
				}
			}
		}
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Array{Elem: gguf.TypeString, Values: tokens}},
		{Key: "tokenizer.ggml.scores", Value: gguf.Array{Elem: gguf.TypeFloat32, Values: scores}},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Array{Elem: gguf.TypeInt32, Values: types}},
		{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(0)},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
	}
}

// words returns every lowercase word of length l, in order.
func words(l int) []string {
	ws := []string{""}
	for i := 0; i < l; i++ {
		var next []string
		for _, w := range ws {
			for c := 'a'; c <= 'z'; c++ {
				next = append(next, w+string(c))
			}
		}
		ws = next
	}
	return ws
}

func writeOnes(w io.Writer, n uint64) error {
	buf := make([]byte, 4*n)
	for i := uint64(0); i < n; i++ {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(1))
	}
	_, err := w.Write(buf)
	return err
}

// weights produces uniform random F16 values in ±0.035 (std 0.02, as in Llama's init) from a
// table of 65536 precomputed halves, indexed by a xorshift generator: gigabytes per minute.
type weights struct {
	state uint64
	table [1 << 16]uint16
	buf   []byte
}

func newWeights(seed uint64) *weights {
	w := &weights{state: seed | 1, buf: make([]byte, 1<<20)}
	for i := range w.table {
		w.table[i] = f16(uniform(uint16(i)))
	}
	return w
}

// uniform maps r evenly onto ±0.035.
func uniform(r uint16) float32 { return (float32(r)/65535*2 - 1) * 0.035 }

func (w *weights) next() uint64 {
	w.state ^= w.state << 13
	w.state ^= w.state >> 7
	w.state ^= w.state << 17
	return w.state
}

func (w *weights) writeF16(out io.Writer, n uint64) error {
	for n > 0 {
		chunk := min(n, uint64(len(w.buf)/2))
		b := w.buf[:2*chunk]
		w.fillF16(b)
		if _, err := out.Write(b); err != nil {
			return err
		}
		n -= chunk
	}
	return nil
}

// fillF16 fills b with random F16 values.
func (w *weights) fillF16(b []byte) {
	for i := 0; i < len(b); i += 8 {
		r := w.next()
		for j := 0; j < 4 && i+2*j < len(b); j++ {
			binary.LittleEndian.PutUint16(b[i+2*j:], w.table[uint16(r>>(16*j))])
		}
	}
}

// writeF16Rows writes rows random rows of n F16 values, each starting with first.
func (w *weights) writeF16Rows(out io.Writer, n, rows uint64, first float32) error {
	buf := make([]byte, 2*n)
	for range rows {
		w.fillF16(buf)
		binary.LittleEndian.PutUint16(buf, f16(first))
		if _, err := out.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// writeRouter writes a router of experts rows of n random F32 values; where hot, the
// first two rows' first value is hotRouter, every other row's 0.
func (w *weights) writeRouter(out io.Writer, n, experts uint64, hot bool) error {
	buf := make([]byte, 4*n*experts)
	for e := range experts {
		for j := range n {
			v := uniform(uint16(w.next()))
			if hot && j == 0 {
				v = 0
				if e < 2 {
					v = hotRouter
				}
			}
			binary.LittleEndian.PutUint32(buf[4*(e*n+j):], math.Float32bits(v))
		}
	}
	_, err := out.Write(buf)
	return err
}

// f16 converts a small float32 to IEEE half precision, flushing subnormals to zero.
func f16(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	if exp <= 0 {
		return sign
	}
	return sign | uint16(exp)<<10 | uint16((b>>13)&0x3ff)
}
