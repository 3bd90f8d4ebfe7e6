package model

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/profinfer/profinfer/internal/gguf"
)

func writeModel(t *testing.T, path, name string, vocab int) {
	t.Helper()
	tokens := make([]string, vocab)
	for i := range tokens {
		tokens[i] = "tok"
	}
	in := &gguf.File{
		KV: []gguf.KV{
			{Key: "general.architecture", Value: "llama"},
			{Key: "general.name", Value: name},
			{Key: "tokenizer.ggml.tokens", Value: gguf.Array{Elem: gguf.TypeString, Values: tokens}},
			{Key: "llama.context_length", Value: uint32(4096)},
			{Key: "general.file_type", Value: uint32(2)},
		},
		Tensors: []gguf.TensorInfo{{Name: "w", Type: gguf.F32, Shape: []uint64{8, 4}}},
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gguf.Write(f, in, func(_ int, w io.Writer) error { _, err := w.Write(make([]byte, 8*4*4)); return err }); err != nil {
		t.Fatal(err)
	}
}

func TestCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	writeModel(t, path, "first", 1000)
	var c Cache
	info, err := c.Read(path, "/models/m.gguf")
	want := Info{Path: "/models/m.gguf", Name: "first", Architecture: "llama", Parameters: 32, FileType: "Q4_0", ContextLength: 4096}
	if err != nil || info != want {
		t.Fatalf("got %+v, %v; want %+v", info, err, want)
	}
	// The same file again, as another process names it: from the cache.
	if info, err = c.Read(path, "/other/m.gguf"); err != nil || info.Name != "first" || info.Path != "/other/m.gguf" {
		t.Fatalf("second read: %+v, %v", info, err)
	}
	// Rewritten in place (another size): read anew.
	writeModel(t, path, "second", 10)
	if info, err = c.Read(path, "/models/m.gguf"); err != nil || info.Name != "second" {
		t.Fatalf("after rewrite: %+v, %v", info, err)
	}
	if _, err := c.Read(filepath.Join(t.TempDir(), "none.gguf"), "/none"); err == nil {
		t.Fatal("missing file: no error")
	}
	if err := os.WriteFile(path, []byte("GGUF\x03\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(path, "/models/m.gguf"); err == nil {
		t.Fatal("truncated file: no error")
	}
}
