package ggml

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/profinfer/profinfer/internal/symbols"
	"github.com/profinfer/profinfer/internal/testbench"
)

// The layout is checked against the target's own field getters, with or without
// ggml_version: the current build and node-llama-cpp 3.6.0's b4753 agree with the known
// layout; a layout with the name elsewhere is refused, naming the getter and both offsets.
func TestVerifyLayoutFromCode(t *testing.T) {
	e := testbench.Require(t)
	for _, path := range []string{
		e.Bin("libggml-base.so"),
		filepath.Join(e.Root, "npm-3.6.0", "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64", "libggml-base.so"),
	} {
		f, err := symbols.Open(path)
		if err != nil {
			testbench.Missing(t, err.Error())
		}
		defer f.Close()
		if err := verify(f, Layouts[0]); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		moved := Layouts[0]
		moved.Name += 8
		want := fmt.Sprintf("ggml: %s: unknown tensor layout: ggml_get_name reads offset 256, the layout of ggml 0.9 to 0.25 has 264", f.Path())
		if err := verify(f, moved); err == nil || err.Error() != want {
			t.Errorf("moved name: %v, want %q", err, want)
		}
	}
}
