package probe

import (
	"os"
	"testing"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/symbols"
)

// Every probe that can be missing says what its absence costs, for the error that lists
// a stripped object's missing symbols.
func TestEveryProbeSaysWhatItsAbsenceLoses(t *testing.T) {
	for _, s := range specs {
		if !s.optional && loses[s.symbol] == "" {
			t.Errorf("probe on %s: no entry in loses", s.symbol)
		}
	}
	for sym := range loses {
		found := false
		for _, s := range specs {
			found = found || s.symbol == sym
		}
		if !found {
			t.Errorf("loses names %s, which no probe uses", sym)
		}
	}
}

// The Vulkan prebuilt's backend (node-llama-cpp 3.22.1, C++) defines the two static
// functions the device probes sit on, under the names they are looked up by, and their
// entries can take a probe that keeps the registers the programs read.
func TestVulkanBackendSymbols(t *testing.T) {
	path := "../../.testenv/npm/node_modules/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan/libggml-vulkan.so"
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; run scripts/testenv.sh", path)
		}
		t.Skipf("%s is missing; run scripts/testenv.sh", path)
	}
	f, err := symbols.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		fn, params string
		keep       symbols.Regs
	}{
		{"synchronize", "P12ggml_backend", symbols.RDI},
		{"cpy_tensor_async", "P12ggml_backendS0_PK11ggml_tensorPS1_", symbols.RDX | symbols.RCX},
	} {
		name := "ggml_backend_vk_" + c.fn
		var sym symbols.Symbol
		ok := false
		for _, n := range backendSymbols(name, c.params) {
			if sym, ok = f.Symbol(n); ok {
				break
			}
		}
		if !ok {
			t.Errorf("%s: no %s", path, name)
			continue
		}
		if _, _, err := f.ProbeOffset(sym, c.keep); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := backends.Name(sym.Name); got != "VK" {
			t.Errorf("%s names backend %q, want VK as its get_name does", sym.Name, got)
		}
	}
}
