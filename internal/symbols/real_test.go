package symbols

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Libraries from the test bench (scripts/testenv.sh): a non-CET llama.cpp
// build and node-llama-cpp's CET-enabled prebuilt ones.
const (
	llamaBin = "../../.testenv/llama.cpp/bin/"
	nlcBin   = "../../.testenv/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"
)

// openBench opens a test bench file, skipping when it is absent except in
// CI, where the bench must have been built.
func openBench(t *testing.T, path string) *File {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; run scripts/testenv.sh", path)
		}
		t.Skipf("%s is missing; run scripts/testenv.sh", path)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(f.BuildID()) {
		t.Errorf("%s: BuildID() = %q", path, f.BuildID())
	}
	return f
}

func TestBenchProbeOffsets(t *testing.T) {
	for _, tc := range []struct {
		lib  string
		sym  string
		keep Regs
		off  uint64
		emul bool
	}{
		{llamaBin + "libggml-cpu.so", "ggml_barrier", Arg1, 7, true},
		{llamaBin + "libggml-cpu.so", "ggml_cpu_extra_compute_forward", Arg1 | Arg2, 0, true},
		{llamaBin + "libggml-cpu.so", "ggml_compute_forward_rms_norm_mul_fused", Arg1 | Arg2 | Arg3, 13, true},
		{llamaBin + "libggml-cpu.so", "ggml_compute_forward_rms_norm_mul_fused", Arg1 | Stack, 0, false},
		{nlcBin + "libggml-cpu-haswell.so", "ggml_barrier", Arg1, 14, true},
		{nlcBin + "libggml-cpu-haswell.so", "ggml_barrier", Arg1 | Arg2, 0, false},
		{nlcBin + "libggml-cpu-haswell.so", "ggml_cpu_extra_compute_forward", Arg1 | Arg2, 4, true},
		{nlcBin + "libggml-cpu-haswell.so", "ggml_compute_forward_rms_norm_mul_fused", Arg1 | Arg2 | Arg3, 20, true},
	} {
		t.Run(filepath.Base(tc.lib)+":"+tc.sym, func(t *testing.T) {
			f := openBench(t, tc.lib)
			sym := mustSymbol(t, f, tc.sym)
			off, emul, err := f.ProbeOffset(sym, tc.keep)
			// The test bench's own build is native: its code, and so the first emulated
			// instruction past the kept registers' last write, follows the CPU that built
			// it (13 bytes in with AVX-512, 16 without). The prebuilt's code is fixed.
			if native := strings.HasPrefix(tc.lib, llamaBin); native && tc.emul && emul && err == nil && off > 0 {
				return
			}
			if off != tc.off || emul != tc.emul || err != nil {
				t.Errorf("ProbeOffset(%s, %#x) = %d, %v, %v; want %d, %v", tc.sym, tc.keep, off, emul, err, tc.off, tc.emul)
			}
		})
	}
}

func TestBenchAccessors(t *testing.T) {
	for _, lib := range []string{llamaBin + "libggml-base.so", nlcBin + "libggml-base.so"} {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(lib)))+"/"+filepath.Base(lib), func(t *testing.T) {
			f := openBench(t, lib)
			table := mustSymbol(t, f, "GGML_OP_NAME")
			if addr, err := f.PCRelTarget(mustSymbol(t, f, "ggml_op_name")); addr != table.Value || err != nil {
				t.Errorf("PCRelTarget(ggml_op_name) = %#x, %v; want GGML_OP_NAME at %#x", addr, err, table.Value)
			}
			if imm, err := f.ImmediateReturn(mustSymbol(t, f, "ggml_tensor_overhead")); imm != 0x170 || err != nil {
				t.Errorf("ImmediateReturn(ggml_tensor_overhead) = %#x, %v; want 0x170", imm, err)
			}
			v, err := f.PCRelTarget(mustSymbol(t, f, "ggml_version"))
			if err != nil {
				t.Fatal(err)
			}
			if s, err := f.CString(v); !regexp.MustCompile(`^\d+\.\d+`).MatchString(s) || err != nil {
				t.Errorf("ggml_version string = %q, %v", s, err)
			}
			if missing := f.Missing("ggml_op_name", "ggml_tensor_overhead", "no_such_symbol"); len(missing) != 1 {
				t.Errorf("Missing() = %q, want [no_such_symbol]", missing)
			}
		})
	}
}

// Defines agrees with the full symbol table: a library defines its own API, an
// executable that imports a function does not define it, a static executable defines all.
func TestBenchDefines(t *testing.T) {
	names := []string{"ggml_version", "ggml_cpu_extra_compute_forward", "llama_decode"}
	for path, want := range map[string][]bool{
		llamaBin + "libggml-cpu.so":           {false, true, false},
		llamaBin + "libggml-base.so":          {true, false, false},
		llamaBin + "llama-bench":              {false, false, false},
		llamaBin + "../portable/llama-server": {true, true, true},
	} {
		f := openBench(t, path)
		got, err := Defines(path, names)
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range names {
			_, full := f.Symbol(name)
			if got[i] != want[i] || got[i] != full {
				t.Errorf("%s: Defines(%s) = %v, Symbol: %v, want %v", path, name, got[i], full, want[i])
			}
		}
	}
	if _, err := Defines("real_test.go", names); err == nil || err.Error() != "symbols: real_test.go: not an ELF file" {
		t.Errorf("Defines on a Go file: %v", err)
	}
}

// The llama_context getters give where n_ctx and n_threads are in both builds, and a
// backend's function pointer resolves back to its symbol, or the CPU's to its name.
func TestBenchFieldsAndAt(t *testing.T) {
	for _, lib := range []string{llamaBin + "libllama.so", nlcBin + "libllama.v0.5.0.so"} {
		t.Run(filepath.Base(lib), func(t *testing.T) {
			f := openBench(t, lib)
			for name, want := range map[string]uint64{"_ZNK13llama_context5n_ctxEv": 8, "_ZNK13llama_context9n_threadsEv": 0x28} {
				if off, err := f.FieldReturn(mustSymbol(t, f, name)); off != want || err != nil {
					t.Errorf("FieldReturn(%s) = %#x, %v; want %#x", name, off, err, want)
				}
			}
			if _, err := f.FieldReturn(mustSymbol(t, f, "llama_decode")); err == nil {
				t.Error("FieldReturn(llama_decode) succeeded")
			}
		})
	}
	f := openBench(t, llamaBin+"libggml-rpc.so")
	want := mustSymbol(t, f, "_ZL21ggml_backend_rpc_nameP12ggml_backend")
	for _, addr := range []uint64{want.Value, want.Value + want.Size - 1} {
		if got, ok := f.At(addr); !ok || got.Name != want.Name {
			t.Errorf("At(%#x) = %+v, %v; want %s", addr, got, ok, want.Name)
		}
	}
	if got, ok := f.At(0); ok {
		t.Errorf("At(0) = %+v", got)
	}
	// The CPU backend names itself with a constant, which a stripped build still shows
	// (by address alone); the RPC backend's name comes from its context.
	if name, err := f.StringReturn(Symbol{Value: want.Value}); err == nil {
		t.Errorf("StringReturn(ggml_backend_rpc_name) = %q", name)
	}
	cpu := openBench(t, llamaBin+"libggml-cpu.so")
	get := mustSymbol(t, cpu, "_ZL25ggml_backend_cpu_get_nameP12ggml_backend")
	if name, err := cpu.StringReturn(Symbol{Value: get.Value}); name != "CPU" || err != nil {
		t.Errorf("StringReturn(ggml_backend_cpu_get_name) = %q, %v; want CPU", name, err)
	}
}

// BenchmarkOpen is the parse of a llama.cpp library's symbol tables, which the collector
// pays once per file, for the first process that maps it, on the cores the model runs on.
func BenchmarkOpen(b *testing.B) {
	path := llamaBin + "libllama.so"
	if _, err := os.Stat(path); err != nil {
		b.Skip(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
