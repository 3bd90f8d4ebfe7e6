package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/discover"
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

// The GPU prebuilts' backends (node-llama-cpp 3.22.1, C++: Vulkan, which the tests run on
// lavapipe, and CUDA, which no machine here can run) define the two static functions the
// device probes sit on, under the names they are looked up by, beside a get_name that
// names the backend as its registration does; their entries take a probe that keeps the registers the programs
// read. Their libggml-base defines the split and the generic wait.
func TestGPUBackendSymbols(t *testing.T) {
	const npm = "../../.testenv/npm/node_modules/@node-llama-cpp/"
	for _, c := range []struct{ dir, lib, backend string }{
		{"linux-x64-vulkan/bins/linux-x64-vulkan/", "libggml-vulkan.so", "VK"},
		{"linux-x64-cuda/bins/linux-x64-cuda/", "libggml-cuda.so", "CUDA"},
	} {
		t.Run(c.backend, func(t *testing.T) {
			dev := openPrebuilt(t, npm+c.dir+c.lib)
			if got := backends.Registered(dev); got != c.backend { // what AttachDevices probes it as
				t.Errorf("%s registers backend %q, want %s", c.lib, got, c.backend)
			}
			for _, fn := range []struct {
				name, params string
				keep         symbols.Regs
			}{
				{"synchronize", "P12ggml_backend", symbols.Arg1},
				{"cpy_tensor_async", "P12ggml_backendS0_PK11ggml_tensorPS1_", symbols.Arg3 | symbols.Arg4},
				{"get_name", "P12ggml_backend", 0},
			} {
				name := "ggml_backend_" + strings.ToLower(c.backend) + "_" + fn.name
				if c.backend == "VK" && fn.name == "get_name" {
					name = "ggml_backend_vk_name" // Vulkan's get_name is called name
				}
				var sym symbols.Symbol
				ok := false
				for _, n := range backendSymbols(name, fn.params) {
					if sym, ok = dev.Symbol(n); ok {
						break
					}
				}
				if !ok {
					t.Errorf("%s: no %s", c.lib, name)
					continue
				}
				if _, _, err := dev.ProbeOffset(sym, fn.keep); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				if got := backends.Name(sym.Name); got != c.backend {
					t.Errorf("%s names backend %q, want %s", sym.Name, got, c.backend)
				}
			}
			base := openPrebuilt(t, npm+c.dir+"libggml-base.so")
			for _, s := range specs {
				if s.role != discover.Base || s.group == app {
					continue
				}
				if sym, ok := base.Function(s.symbol); !ok {
					t.Errorf("libggml-base.so: no %s", s.symbol)
				} else if _, _, err := base.ProbeOffset(sym, s.keep); err != nil {
					t.Errorf("%s: %v", s.symbol, err)
				}
			}
		})
	}
}

// ggml-vulkan's perf logger, in the Vulkan prebuilt: the functions probed where it is on,
// placed with the registers their programs read intact, and its flags, a byte each.
func TestVulkanLoggerSymbols(t *testing.T) {
	dev := openPrebuilt(t, "../../.testenv/npm/node_modules/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan/libggml-vulkan.so")
	label, print, ok := loggerFunctions(dev)
	if !ok {
		t.Fatalf("no %s, or no %v", loggerLabel, loggerPrints)
	}
	if print.Name != loggerPrints[0] {
		t.Errorf("print probe on %s, want the clone that prints, %s", print.Name, loggerPrints[0])
	}
	for _, p := range []struct {
		sym  symbols.Symbol
		keep symbols.Regs
	}{{label, symbols.Arg1 | symbols.Arg3}, {print, symbols.Arg1}} {
		if _, _, err := dev.ProbeOffset(p.sym, p.keep); err != nil {
			t.Errorf("%s: %v", p.sym.Name, err)
		}
	}
	for _, n := range []string{loggerEnabled, loggerConcurrent} {
		if s, ok := dev.Symbol(n); !ok || s.Size != 1 {
			t.Errorf("flag %s: %+v, %v", n, s, ok)
		}
	}
}

// openPrebuilt opens a test bench file: its absence skips the test, except in CI, where
// the bench must have been built.
func openPrebuilt(t *testing.T, path string) *symbols.File {
	t.Helper()
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
	t.Cleanup(func() { f.Close() })
	return f
}

// node-llama-cpp's arm64 prebuilt (3.22.1, clang): every entry probe finds its symbol in
// the object of its role, in each of the eight CPU variants, and is placed on arm64 code
// with the registers its program reads intact. Where the kernel simulates the instruction
// it lands on, a hit costs a trap; elsewhere the instruction is stepped out of line as
// well. The offsets are this build's, read from its disassembly.
func TestARM64PrebuiltProbes(t *testing.T) {
	const dir = "../../.testenv/npm/node_modules/@node-llama-cpp/linux-arm64/bins/linux-arm64/"
	cpus, _ := filepath.Glob(dir + "libggml-cpu-*.so")
	if len(cpus) != 8 && os.Getenv("CI") == "true" {
		t.Fatalf("%d CPU variants in %s, want 8; run scripts/testenv.sh", len(cpus), dir)
	}
	files := map[discover.Role][]string{discover.Llama: {"libllama.v0.5.0.so"}, discover.Base: {"libggml-base.so"}}
	for _, c := range cpus {
		files[discover.CPU] = append(files[discover.CPU], filepath.Base(c))
	}
	want := map[string]uint64{ // simulated, at these offsets
		"libllama.v0.5.0.so:llama_decode":                                  12, // bl, past stp, str and mov x29
		"libggml-base.so:ggml_backend_graph_compute_async":                 0,  // cbz
		"libggml-cpu-armv8.2_1.so:ggml_graph_compute":                      32, // bl ggml_cpu_init, past mov x19, x1
		"libggml-base.so:ggml_backend_tensor_copy":                         28, // b.ne, past loads into w8 and w9
		"libggml-cpu-armv8.2_1.so:ggml_cpu_extra_compute_forward":          24, // bl, past mov x19, x1 and mov x20, x0
		"libggml-cpu-armv8.2_1.so:ggml_compute_forward_rms_norm_mul_fused": 40, // cbz x2, past a store of d10
		"libggml-cpu-armv8.2_1.so:ggml_barrier":                            12, // b.eq, past and w8 and subs w10
	}
	for _, s := range specs {
		if s.ret {
			continue // return probes stay on the entry
		}
		for _, lib := range files[s.role] {
			f := openPrebuilt(t, dir+lib)
			name := s.symbol
			for _, c := range choices[s.symbol] {
				if _, ok := f.Function(c); ok {
					name = c
					break
				}
			}
			sym, ok := f.Function(name)
			if !ok {
				if !s.optional {
					t.Errorf("%s: no %s", lib, name)
				}
				continue
			}
			off, emulated, err := f.ProbeOffset(sym, s.keep)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			t.Logf("%s: %s+%d, simulated %v", lib, name, off, emulated)
			if w, ok := want[lib+":"+name]; ok && (off != w || !emulated) {
				t.Errorf("%s: %s+%d (simulated %v), want +%d, simulated", lib, name, off, emulated, w)
			}
		}
	}
}
