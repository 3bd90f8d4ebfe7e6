package ggml

import (
	"encoding/binary"
	"fmt"

	"github.com/profinfer/profinfer/internal/symbols"
)

// Context says where a libllama keeps the fields of struct llama_context that profinfer
// reports. The struct is C++ and changes between releases, so the offsets are read from
// the build itself: its getters are one load each.
type Context struct {
	NCtx, NThreads  uint64
	NBatch, NUbatch uint64
	// Batches says that NBatch and NUbatch are known: the release has getters for them
	// that are plain loads. Without, n_ctx and n_threads are still read.
	Batches bool
	// NCtxSeq and NSeqMax are n_ctx_seq (the cells one sequence may hold: n_ctx, or its
	// share where each slot has its own) and n_seq_max; Seqs says that they are known.
	NCtxSeq, NSeqMax uint64
	Seqs             bool
}

// The getters of llama_context's fields, in libllama.
const (
	getNCtx     = "_ZNK13llama_context5n_ctxEv"
	getNThreads = "_ZNK13llama_context9n_threadsEv"
	getNBatch   = "_ZNK13llama_context7n_batchEv"
	getNUbatch  = "_ZNK13llama_context8n_ubatchEv"
	getNCtxSeq  = "_ZNK13llama_context9n_ctx_seqEv"
	getNSeqMax  = "_ZNK13llama_context9n_seq_maxEv"
)

// ContextIn reads the layout from libllama's getters llama_context::n_ctx and n_threads,
// which it needs, and n_batch and n_ubatch where both are there to read.
func ContextIn(f *symbols.File) (Context, error) {
	var c Context
	field := func(getter string) (uint64, error) {
		sym, ok := f.Symbol(getter)
		if !ok {
			return 0, fmt.Errorf("ggml: %s lacks llama_context's getter %s", f.Path(), getter)
		}
		return f.FieldReturn(sym)
	}
	var err error
	if c.NCtx, err = field(getNCtx); err != nil {
		return Context{}, err
	}
	if c.NThreads, err = field(getNThreads); err != nil {
		return Context{}, err
	}
	// Optional: a getter missing or not a plain load leaves the batch sizes unknown, and
	// the rest as it was.
	batch, err := field(getNBatch)
	ubatch, err2 := field(getNUbatch)
	if err == nil && err2 == nil {
		c.NBatch, c.NUbatch, c.Batches = batch, ubatch, true
	}
	seq, err := field(getNCtxSeq)
	seqs, err2 := field(getNSeqMax)
	if err == nil && err2 == nil {
		c.NCtxSeq, c.NSeqMax, c.Seqs = seq, seqs, true
	}
	return c, nil
}

// Params are what profinfer reports of a live llama_context.
type Params struct {
	Size, Threads int // n_ctx, n_threads
	Batch, Ubatch int // n_batch, n_ubatch; 0 where the layout does not have them
	SeqSize, Seqs int // n_ctx_seq, n_seq_max; 0 where the layout does not have them
}

// Parse returns the parameters of a llama_context from head, its first bytes as a decode
// sent them. Fields past head, or values no live context holds, are an error.
func (c Context) Parse(head []byte) (Params, error) {
	// An array: no allocation a decode.
	offs := [6]uint64{c.NCtx, c.NThreads, c.NBatch, c.NUbatch, c.NCtxSeq, c.NSeqMax}
	known := [6]bool{true, true, c.Batches, c.Batches, c.Seqs, c.Seqs}
	var vals [6]int
	for i, off := range offs {
		if !known[i] {
			continue
		}
		if off+4 > uint64(len(head)) {
			return Params{}, fmt.Errorf("ggml: llama_context's field at %#x lies past the %d bytes sent with a decode", off, len(head))
		}
		vals[i] = int(int32(binary.LittleEndian.Uint32(head[off:])))
	}
	p := Params{Size: vals[0], Threads: vals[1], Batch: vals[2], Ubatch: vals[3], SeqSize: vals[4], Seqs: vals[5]}
	if p.Size <= 0 || p.Size > maxCtx || p.Threads <= 0 || p.Threads > maxThreads ||
		c.Batches && (p.Batch <= 0 || p.Batch > maxCtx || p.Ubatch <= 0 || p.Ubatch > maxCtx) ||
		c.Seqs && (p.SeqSize <= 0 || p.SeqSize > p.Size || p.Seqs <= 0 || p.Seqs > maxSeqs) {
		return Params{}, fmt.Errorf("ggml: a llama_context reads n_ctx %d, n_threads %d, n_batch %d, n_ubatch %d, n_ctx_seq %d, n_seq_max %d: not a live one's",
			p.Size, p.Threads, p.Batch, p.Ubatch, p.SeqSize, p.Seqs)
	}
	return p, nil
}

// maxCtx, maxThreads and maxSeqs bound what a live llama_context holds; maxCtx bounds
// its batch sizes and n_ctx_seq too.
const (
	maxCtx     = 1 << 24
	maxThreads = 1 << 12
	maxSeqs    = 1 << 12 // LLAMA_MAX_SEQ is 256
)
