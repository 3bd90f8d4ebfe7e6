package testbench

import (
	"io"
	"os"

	"github.com/profinfer/profinfer/internal/gguf"
)

// Rename copies the GGUF model src to dst with general.name set to name: a model anyone
// could have written, for tests of what a hostile name does downstream.
func Rename(src, dst, name string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := gguf.Read(in)
	if err != nil {
		return err
	}
	set := false
	for i := range f.KV {
		if f.KV[i].Key == "general.name" {
			f.KV[i].Value, set = name, true
		}
	}
	if !set {
		f.KV = append(f.KV, gguf.KV{Key: "general.name", Value: name})
	}
	// Write assigns the new file's offsets; the data is read at the old ones.
	src0 := make([]int64, len(f.Tensors))
	for i, t := range f.Tensors {
		src0[i] = int64(f.DataOffset + t.Offset)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	err = gguf.Write(out, f, func(i int, w io.Writer) error {
		t := f.Tensors[i]
		n, err := t.Type.Bytes(t.Elements())
		if err != nil {
			return err
		}
		_, err = io.Copy(w, io.NewSectionReader(in, src0[i], int64(n)))
		return err
	})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
