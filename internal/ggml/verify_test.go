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

// The arm64 prebuilt of the same release reads the same version and has the same layout
// as the x64 one, found from its arm64 code: the constant in ggml_tensor_overhead, the
// version string ggml_version forms with adrp and add, and the offsets its getters load.
func TestLayoutFromARM64Code(t *testing.T) {
	e := testbench.Require(t)
	var versions []string
	var layouts []Layout
	for _, dir := range []string{e.PrebuiltDir(), e.ARM64PrebuiltDir()} {
		f, err := symbols.Open(filepath.Join(dir, "libggml-base.so"))
		if err != nil {
			testbench.Missing(t, err.Error())
		}
		defer f.Close()
		v, l, err := layoutOf(f)
		if err != nil {
			t.Fatalf("%s: %v", f.Path(), err)
		}
		versions, layouts = append(versions, v), append(layouts, l)
	}
	if versions[0] == "" || versions[1] != versions[0] || layouts[1] != layouts[0] {
		t.Errorf("arm64: ggml %q, layout of %s; x64: ggml %q, layout of %s", versions[1], layouts[1].Versions, versions[0], layouts[0].Versions)
	}
	libs, _ := filepath.Glob(filepath.Join(e.ARM64PrebuiltDir(), "libllama.*so"))
	if len(libs) != 1 {
		testbench.Missing(t, "libllama in "+e.ARM64PrebuiltDir())
	}
	f, err := symbols.Open(libs[0])
	if err != nil {
		testbench.Missing(t, err.Error())
	}
	defer f.Close()
	if c, err := ContextIn(f); err != nil || c.NCtx == 0 || c.NThreads == 0 {
		t.Errorf("llama_context's fields from arm64 code: %+v, %v", c, err)
	}
}
