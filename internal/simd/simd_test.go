package simd

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/profinfer/profinfer/internal/symbols"
	"github.com/profinfer/profinfer/internal/testbench"
)

// bench opens a file of the test bench (scripts/testenv.sh), or ends the test where it is
// absent: skipped on a developer machine, failed in CI.
func bench(t *testing.T, rel string) *symbols.File {
	t.Helper()
	path := filepath.Join(cmp.Or(os.Getenv("PROFINFER_TESTENV"), "../../.testenv"), rel)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		testbench.Missing(t, path+" is missing; run scripts/testenv.sh")
	}
	f, err := symbols.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

const (
	nlc   = "npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"
	nlcV8 = "npm/node_modules/@node-llama-cpp/linux-arm64/bins/linux-arm64/"
)

// TestBuildReal reads the test bench's CPU backends: each node-llama-cpp variant's level
// is what its name promises, and what its dot kernels show agrees up to what those
// kernels use (ggml's AMX and SME code lies outside them).
func TestBuildReal(t *testing.T) {
	for _, c := range []struct{ file, build, kernels string }{
		{nlc + "libggml-cpu-x64.so", "sse2", "sse2"},
		{nlc + "libggml-cpu-sse42.so", "ssse3", "ssse3"},
		{nlc + "libggml-cpu-sandybridge.so", "avx", "avx"},
		{nlc + "libggml-cpu-piledriver.so", "avx", "avx"},
		{nlc + "libggml-cpu-haswell.so", "avx2", "avx2"},
		{nlc + "libggml-cpu-alderlake.so", "avx_vnni", "avx_vnni"},
		{nlc + "libggml-cpu-skylakex.so", "avx512", "avx512"},
		{nlc + "libggml-cpu-icelake.so", "avx512_vnni", "avx512_vnni"},
		{nlc + "libggml-cpu-zen4.so", "avx512_vnni", "avx512_vnni"},
		{nlc + "libggml-cpu-sapphirerapids.so", "amx_int8", "avx512_vnni"},
		{nlcV8 + "libggml-cpu-armv8.0_1.so", "neon", "neon"},
		{nlcV8 + "libggml-cpu-armv8.2_1.so", "dotprod", "dotprod"},
		{nlcV8 + "libggml-cpu-armv8.2_3.so", "sve", "sve"},
		{nlcV8 + "libggml-cpu-armv8.6_1.so", "i8mm", "i8mm"},
		{nlcV8 + "libggml-cpu-armv9.2_2.so", "sme", "i8mm"},
		// ggml in one library, its has_* functions in ggml.c (b3889's prebuilt).
		{"npm-3.1.1/" + testbench.PrebuiltBins + "/libggml.so", "avx2", "avx2"},
		// @fugood's addons: ggml linked into one index.node, found by its dynamic
		// symbols; built for x86-64's baseline, no AVX anywhere in their code.
		{"npm-fugood/node_modules/@fugood/node-llama-linux-x64/index.node", "sse2", "sse2"},
		{"npm-fugood/node_modules/@fugood/node-whisper-linux-x64/index.node", "sse2", "sse2"},
		// No CPU backend: neither.
		{nlc + "libggml-base.so", "", ""},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			f := bench(t, c.file)
			if got := Build(f); got != c.build {
				t.Errorf("Build = %q, want %q", got, c.build)
			}
			if got := kernels(f); got != c.kernels {
				t.Errorf("kernels = %q, want %q", got, c.kernels)
			}
		})
	}
}

// A static arm64 executable for any ARMv8-A, the test bench's portable one, reads as
// NEON, as its kernels do. (Apart from TestBuildReal: make test builds it beside the
// tests, and runs this test after them.)
func TestBuildPortableARM64(t *testing.T) {
	f := bench(t, "llama.cpp/portable-arm64/llama-server")
	if got, k := Build(f), kernels(f); got != "neon" || k != "neon" {
		t.Errorf("Build = %q, kernels = %q, want neon", got, k)
	}
}

// TestBuildBench: the test bench's own builds against this machine's CPU. Those built
// for it (its llama.cpp, named ggml's options from /proc/cpuinfo; the older releases'
// static llama-bench, -march=native) read as the host does; the portable static build,
// for any x86-64 with AVX2, as avx2; Ollama's old engine, which `go build` compiles
// through cgo with no -march, as x86-64's baseline.
func TestBuildBench(t *testing.T) {
	host := Host()
	if runtime.GOARCH != "amd64" || host == "" {
		t.Skip("the test bench's builds are x86-64's, read against this CPU")
	}
	for _, c := range []struct{ file, want string }{
		{"llama.cpp/bin/libggml-cpu.so", host},
		{"llama.cpp-b3889/static/llama-bench", host},
		{"llama.cpp-b4234/static/llama-bench", host},
		{"llama.cpp/portable/llama-server", "avx2"},
		{"ollama-old/ollama", "sse2"},
	} {
		t.Run(c.file, func(t *testing.T) {
			if got := Build(bench(t, c.file)); got != c.want {
				t.Errorf("Build = %q, want %q", got, c.want)
			}
		})
	}
}

func TestFromCPUInfo(t *testing.T) {
	for _, c := range []struct{ name, cpuinfo, want string }{
		{"epyc", "processor\t: 0\nflags\t\t: fpu sse sse2 pni ssse3 fma avx f16c avx2 avx512f avx512_bf16 avx512vbmi avx512_vnni\n", "avx512_vnni"},
		{"alder lake", "flags\t\t: sse2 pni ssse3 avx avx2 avx_vnni\n", "avx_vnni"},
		// A VM that masks AVX: the guest's kernel lists only what it may use.
		{"masked", "flags\t\t: fpu sse sse2 pni ssse3 sse4_1 sse4_2\n", "ssse3"},
		{"baseline", "flags\t\t: fpu sse sse2\n", "sse2"},
		{"neoverse-n1", "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 asimddp\n", "dotprod"},
		{"graviton3", "Features\t: fp asimd asimddp sve i8mm\n", "i8mm"},
		{"none", "processor\t: 0\n", ""},
	} {
		if got := FromCPUInfo([]byte(c.cpuinfo)); got != c.want {
			t.Errorf("%s: FromCPUInfo = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestNarrower(t *testing.T) {
	for _, c := range []struct {
		build, host string
		want        bool
	}{
		{"sse2", "avx512_vnni", true},
		{"avx2", "avx512", true},
		{"avx512_vnni", "avx512_vnni", false},
		{"avx512", "avx2", false}, // would not run, but is not narrower
		{"", "avx2", false},
		{"avx2", "", false},
		{"neon", "dotprod", true},
	} {
		if got := Narrower(c.build, c.host); got != c.want {
			t.Errorf("Narrower(%q, %q) = %v", c.build, c.host, got)
		}
	}
}

// TestKernelX86 on single instructions, as an assembler writes them.
func TestKernelX86(t *testing.T) {
	for _, c := range []struct {
		asm  string
		code []byte
		want string
	}{
		{"vpdpbusd %zmm1,%zmm2,%zmm0", []byte{0x62, 0xf2, 0x6d, 0x48, 0x50, 0xc1}, "avx512_vnni"},
		{"vpdpbusd %ymm1,%ymm2,%ymm0 (EVEX)", []byte{0x62, 0xf2, 0x6d, 0x28, 0x50, 0xc1}, "avx512_vnni"},
		{"{vex} vpdpbusd %ymm1,%ymm2,%ymm0", []byte{0xc4, 0xe2, 0x6d, 0x50, 0xc1}, "avx_vnni"},
		{"vpaddd %zmm1,%zmm2,%zmm0", []byte{0x62, 0xf1, 0x6d, 0x48, 0xfe, 0xc1}, "avx512"},
		{"vpmaddubsw %ymm1,%ymm2,%ymm0", []byte{0xc4, 0xe2, 0x6d, 0x04, 0xc1}, "avx2"},
		{"vperm2f128 $1,%ymm1,%ymm2,%ymm0", []byte{0xc4, 0xe3, 0x6d, 0x06, 0xc1, 0x01}, "avx"},
		{"vaddps %ymm1,%ymm2,%ymm0", []byte{0xc5, 0xec, 0x58, 0xc1}, "avx"},
		{"vaddps %xmm1,%xmm2,%xmm0", []byte{0xc5, 0xe8, 0x58, 0xc1}, "avx"},
		{"pmaddubsw %xmm1,%xmm0", []byte{0x66, 0x0f, 0x38, 0x04, 0xc1}, "ssse3"},
		{"haddps %xmm1,%xmm0", []byte{0xf2, 0x0f, 0x7c, 0xc1}, "sse3"},
		{"addps %xmm1,%xmm0; ret", []byte{0x0f, 0x58, 0xc1, 0xc3}, "sse2"},
		{"undecodable, then addps", []byte{0x0f, 0xff, 0x0f, 0x58, 0xc1}, "sse2"},
	} {
		if got := x86[kernelX86(c.code)].name; got != c.want {
			t.Errorf("%s: %q, want %q", c.asm, got, c.want)
		}
	}
}

// TestKernelARM64 on single instructions, as an assembler encodes them.
func TestKernelARM64(t *testing.T) {
	for _, c := range []struct {
		asm  string
		code []byte
		want string
	}{
		{"sdot v0.4s, v1.16b, v2.16b", []byte{0x20, 0x94, 0x82, 0x4e}, "dotprod"},
		{"udot v0.4s, v1.16b, v2.4b[1]", []byte{0x20, 0xe0, 0xa2, 0x6f}, "dotprod"},
		{"smmla v0.4s, v1.16b, v2.16b", []byte{0x20, 0xa4, 0x82, 0x4e}, "i8mm"},
		{"sdot z0.s, z1.b, z2.b", []byte{0x20, 0x00, 0x82, 0x44}, "sve"},
		{"fmla v0.4s, v1.4s, v2.4s; ret", []byte{0x20, 0xcc, 0x22, 0x4e, 0xc0, 0x03, 0x5f, 0xd6}, "neon"},
	} {
		if got := arm64[kernelARM64(c.code)].name; got != c.want {
			t.Errorf("%s: %q, want %q", c.asm, got, c.want)
		}
	}
}
