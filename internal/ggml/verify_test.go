//go:build e2e

package ggml

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/profinfer/profinfer/internal/symbols"
	"github.com/profinfer/profinfer/internal/testbench"
)

// The layout is checked against the target's own field getters, with or without
// ggml_version: the current build and node-llama-cpp 3.6.0's b4753 and 3.3.0's b4234 have
// the first layout, 3.1.1's b3889 (with ggml_tensor.grad) the second, and each refuses the
// other's, naming the getter and both offsets.
func TestVerifyLayoutFromCode(t *testing.T) {
	e := testbench.Require(t)
	nlc := func(v, lib string) string { return filepath.Join(e.OldPrebuiltDir(v), lib) }
	for _, c := range []struct {
		path string
		want int
	}{
		{e.Bin("libggml-base.so"), 0},
		{nlc("3.6.0", "libggml-base.so"), 0},
		{nlc("3.3.0", "libggml-base.so"), 0},
		{nlc("3.1.1", "libggml.so"), 1},
	} {
		f, err := symbols.Open(c.path)
		if err != nil {
			testbench.Missing(t, err.Error())
		}
		defer f.Close()
		if err := verify(f, Layouts[c.want]); err != nil {
			t.Errorf("%s: %v", c.path, err)
		}
		other := Layouts[1-c.want]
		want := fmt.Sprintf("ggml: %s: unknown tensor layout: ggml_get_name reads offset %d, the layout of ggml %s has %d",
			f.Path(), Layouts[c.want].Name, other.Versions, other.Name)
		if err := verify(f, other); err == nil || err.Error() != want {
			t.Errorf("other layout: %v, want %q", err, want)
		}
	}
}
