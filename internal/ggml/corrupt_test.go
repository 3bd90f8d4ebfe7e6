//go:build e2e

package ggml_test

import (
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/symbols"
	"github.com/profinfer/profinfer/internal/testbench"
)

// Corrupt and truncated GGML objects give an error, never a panic or a layout: real
// libraries of both layouts, truncated, with their getters overwritten, and with random
// bytes flipped, inspected against their own bytes as memory.
func TestInspectCorruptObjects(t *testing.T) {
	e := testbench.Require(t)
	for _, path := range []string{
		e.Bin("libggml-base.so"),
		filepath.Join(e.OldPrebuiltDir("3.1.1"), "libggml.so"),
	} {
		orig, err := os.ReadFile(path)
		if err != nil {
			testbench.Missing(t, err.Error())
		}
		inspect := func(data []byte) (*ggml.Target, error) {
			f, err := symbols.NewFile(bytes.NewReader(data), path)
			if err != nil {
				return nil, err
			}
			return ggml.Inspect(f, bytes.NewReader(data), 0)
		}
		for _, n := range []int{0, 16, 64, len(orig) / 4, len(orig) / 2, len(orig) - 1} {
			if target, err := inspect(orig[:n]); err == nil {
				t.Errorf("%s truncated to %d bytes: %+v, no error", path, n, target)
			}
		}
		f, err := symbols.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ef, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		text := ef.Section(".text")
		ef.Close()
		for _, getter := range []string{"ggml_tensor_overhead", "ggml_get_name"} {
			sym, _ := f.Symbol(getter)
			off := text.Offset + sym.Value - text.Addr
			data := bytes.Clone(orig)
			for i := range 16 {
				data[off+uint64(i)] = 0xcc // int3
			}
			if _, err := inspect(data); err == nil || !strings.Contains(err.Error(), getter) {
				t.Errorf("%s with %s overwritten: %v, want an error naming it", path, getter, err)
			}
		}
		f.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			data := bytes.Clone(orig)
			for range 64 {
				data[rng.IntN(len(data))] = byte(rng.Uint32())
			}
			_, _ = inspect(data) // no panic; an intact getter may still establish the layout
		}
	}
}

// An object read before the dynamic loader relocated it (its own bytes as memory: the
// tables' pointers are zero in the file) is ErrNotRelocated, which the registry looks at
// again a moment later: a library with the tables' symbols, and a stripped addon
// (whisper.cpp's Vulkan build, GGML linked in) whose tables are found through their
// accessors, with no length.
func TestInspectUnrelocated(t *testing.T) {
	e := testbench.Require(t)
	e.RequireFugood(t)
	for _, path := range []string{
		e.Bin("libggml-base.so"),
		filepath.Join(e.FugoodDir(), "node_modules/@fugood/node-whisper-linux-x64-vulkan/index.node"),
	} {
		f, err := symbols.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		const at = 0x7f0000000000 // where the loader mapped it
		if target, err := ggml.Inspect(f, loadedImage(t, path, at), at); !errors.Is(err, ggml.ErrNotRelocated) {
			t.Errorf("%s unrelocated: %+v, %v; want ErrNotRelocated", path, target, err)
		}
		f.Close()
	}
}

// loadedImage is path's memory as the loader maps it at address at before relocating
// it: its loaded segments, and nothing else mapped.
func loadedImage(t *testing.T, path string, at int64) io.ReaderAt {
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	var image []byte
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		if end := int(p.Vaddr + p.Memsz); end > len(image) {
			image = append(image, make([]byte, end-len(image))...)
		}
		if _, err := p.ReadAt(image[p.Vaddr:p.Vaddr+p.Filesz], 0); err != nil {
			t.Fatal(err)
		}
	}
	return offsetReader{bytes.NewReader(image), at}
}

// offsetReader serves r's bytes from address at on.
type offsetReader struct {
	r  io.ReaderAt
	at int64
}

func (o offsetReader) ReadAt(p []byte, off int64) (int, error) {
	if off < o.at {
		return 0, errors.New("unmapped")
	}
	return o.r.ReadAt(p, off-o.at)
}
