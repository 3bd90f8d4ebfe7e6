package ggml

import (
	"encoding/binary"
	"fmt"
	"io"

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
}

// The getters of llama_context's fields, in libllama.
const (
	getNCtx     = "_ZNK13llama_context5n_ctxEv"
	getNThreads = "_ZNK13llama_context9n_threadsEv"
	getNBatch   = "_ZNK13llama_context7n_batchEv"
	getNUbatch  = "_ZNK13llama_context8n_ubatchEv"
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
	return c, nil
}

// Params are what profinfer reports of a live llama_context.
type Params struct {
	Size, Threads int // n_ctx, n_threads
	Batch, Ubatch int // n_batch, n_ubatch; 0 where the layout does not have them
}

// Read returns the parameters of the llama_context at ctx in a process whose memory is
// mem. Values no live context holds are an error: a process may free a context
// (llama-bench makes one per test) before profinfer reads it, and reuse its memory.
func (c Context) Read(mem io.ReaderAt, ctx uint64) (Params, error) {
	offs := []uint64{c.NCtx, c.NThreads}
	if c.Batches {
		offs = append(offs, c.NBatch, c.NUbatch)
	}
	var vals [4]int
	var b [4]byte
	for i, off := range offs {
		if _, err := mem.ReadAt(b[:], int64(ctx+off)); err != nil {
			return Params{}, fmt.Errorf("ggml: reading llama_context at %#x: %w", ctx, err)
		}
		vals[i] = int(int32(binary.LittleEndian.Uint32(b[:])))
	}
	p := Params{Size: vals[0], Threads: vals[1], Batch: vals[2], Ubatch: vals[3]}
	if p.Size <= 0 || p.Size > maxCtx || p.Threads <= 0 || p.Threads > maxThreads ||
		c.Batches && (p.Batch <= 0 || p.Batch > maxCtx || p.Ubatch <= 0 || p.Ubatch > maxCtx) {
		return Params{}, fmt.Errorf("ggml: llama_context at %#x reads n_ctx %d, n_threads %d, n_batch %d, n_ubatch %d: freed since",
			ctx, p.Size, p.Threads, p.Batch, p.Ubatch)
	}
	return p, nil
}

// maxCtx and maxThreads bound what a live llama_context holds; maxCtx bounds its batch
// sizes too.
const (
	maxCtx     = 1 << 24
	maxThreads = 1 << 12
)
