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
	NCtx, NThreads uint64
}

// ContextIn reads the layout from libllama's getters llama_context::n_ctx and n_threads.
func ContextIn(f *symbols.File) (Context, error) {
	var c Context
	for _, g := range []struct {
		symbol string
		off    *uint64
	}{{"_ZNK13llama_context5n_ctxEv", &c.NCtx}, {"_ZNK13llama_context9n_threadsEv", &c.NThreads}} {
		sym, ok := f.Symbol(g.symbol)
		if !ok {
			return Context{}, fmt.Errorf("ggml: %s lacks llama_context's getter %s", f.Path(), g.symbol)
		}
		off, err := f.FieldReturn(sym)
		if err != nil {
			return Context{}, err
		}
		*g.off = off
	}
	return c, nil
}

// Read returns the context size and threads of the llama_context at ctx in a process whose
// memory is mem. Values no live context holds are an error: a process may free a context
// (llama-bench makes one per test) before profinfer reads it, and reuse its memory.
func (c Context) Read(mem io.ReaderAt, ctx uint64) (size, threads int, err error) {
	var b [4]byte
	vals := [2]int{}
	for i, off := range [2]uint64{c.NCtx, c.NThreads} {
		if _, err := mem.ReadAt(b[:], int64(ctx+off)); err != nil {
			return 0, 0, fmt.Errorf("ggml: reading llama_context at %#x: %w", ctx, err)
		}
		vals[i] = int(int32(binary.LittleEndian.Uint32(b[:])))
	}
	size, threads = vals[0], vals[1]
	if size <= 0 || size > maxCtx || threads <= 0 || threads > maxThreads {
		return 0, 0, fmt.Errorf("ggml: llama_context at %#x reads n_ctx %d, n_threads %d: freed since", ctx, size, threads)
	}
	return size, threads, nil
}

// maxCtx and maxThreads bound what a live llama_context holds.
const (
	maxCtx     = 1 << 24
	maxThreads = 1 << 12
)
