// Package simd tells which SIMD a GGML CPU backend was built for, read from its code, and
// which this machine's CPU has, on one scale per architecture, so that a build narrower
// than its CPU (a baseline build, the wrong variant, a VM that masks the CPU's flags)
// can be named. Both are read once: the build at attach, the CPU at start.
package simd

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/symbols"
)

// rung is one step of an architecture's scale: its name, the ggml function that returns
// whether a build has it (a compile-time constant), and the CPU's flag for it in
// /proc/cpuinfo.
type rung struct{ name, has, flag string }

// The scales, narrowest first, in the order ggml's CPU variants climb them
// (x64 < sse42 < sandybridge < haswell < alderlake < skylakex < icelake < sapphirerapids;
// armv8.0 < armv8.2 < armv8.6 < armv9.2). A level is the highest rung a build or CPU
// has; one below another lacks the wider kernels the other runs.
var (
	x86 = []rung{
		{"sse2", "", ""}, // every x86-64
		{"sse3", "ggml_cpu_has_sse3", "pni"},
		{"ssse3", "ggml_cpu_has_ssse3", "ssse3"},
		{"avx", "ggml_cpu_has_avx", "avx"},
		{"avx2", "ggml_cpu_has_avx2", "avx2"},
		{"avx_vnni", "ggml_cpu_has_avx_vnni", "avx_vnni"},
		{"avx512", "ggml_cpu_has_avx512", "avx512f"},
		{"avx512_vnni", "ggml_cpu_has_avx512_vnni", "avx512_vnni"},
		{"amx_int8", "ggml_cpu_has_amx_int8", "amx_int8"},
	}
	arm64 = []rung{
		{"neon", "ggml_cpu_has_neon", "asimd"},
		{"dotprod", "ggml_cpu_has_dotprod", "asimddp"},
		{"sve", "ggml_cpu_has_sve", "sve"},
		{"i8mm", "ggml_cpu_has_matmul_int8", "i8mm"},
		{"sme", "ggml_cpu_has_sme", "sme"},
	}
	scales = map[elf.Machine][]rung{elf.EM_X86_64: x86, elf.EM_AARCH64: arm64}
)

// Build is the level the GGML CPU backend in f was compiled for: the highest rung whose
// ggml_cpu_has_* returns 1, read from its code (`mov $1,%eax; ret`, `mov w0, #1; ret`);
// where no such function is there to read, what the vector code of its dot kernels
// shows. "" where f holds neither.
func Build(f *symbols.File) string {
	scale := scales[f.Machine()]
	best, read := 0, false
	for i, r := range scale {
		sym, ok := f.Symbol(r.has)
		if r.has == "" || !ok {
			continue
		}
		v, err := f.ImmediateReturn(sym)
		if err != nil {
			continue // not a constant (an old release's run-time check): the kernels tell
		}
		read = true
		if v != 0 {
			best = i
		}
	}
	if read {
		return scale[best].name
	}
	return kernels(f)
}

// Host is the level of the CPU /proc/cpuinfo describes; "" where it cannot be read.
func Host() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return FromCPUInfo(b)
}

// HostFlags are the flags /proc/cpuinfo lists for the first CPU (x86's "flags", arm64's
// "Features"); nil where it cannot be read.
func HostFlags() []string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	_, flags := flagsOf(b)
	return flags
}

// FromCPUInfo is the level of the first CPU in a /proc/cpuinfo's text: the highest rung
// whose flag it lists, as the kernel exposes them, so that a hypervisor's masking counts.
func FromCPUInfo(cpuinfo []byte) string {
	scale, flags := flagsOf(cpuinfo)
	if scale == nil {
		return ""
	}
	best := 0
	for i, r := range scale {
		if r.flag != "" && slices.Contains(flags, r.flag) {
			best = i
		}
	}
	return scale[best].name
}

// flagsOf is the first CPU's flags in a /proc/cpuinfo's text, and their architecture's
// scale; nil where it lists none.
func flagsOf(cpuinfo []byte) ([]rung, []string) {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		if scale := map[string][]rung{"flags": x86, "Features": arm64}[strings.TrimSpace(key)]; scale != nil {
			return scale, strings.Fields(val)
		}
	}
	return nil, nil
}

// Rank is level's place on its scale, from 0; -1 for "" or a name on neither.
func Rank(level string) int {
	for _, scale := range scales {
		if i := slices.IndexFunc(scale, func(r rung) bool { return r.name == level }); i >= 0 {
			return i
		}
	}
	return -1
}

// Narrower says whether a build's level is below its host's: the CPU has SIMD that the
// build's kernels do not use. False where either is unknown.
func Narrower(build, host string) bool {
	b, h := Rank(build), Rank(host)
	return b >= 0 && h >= 0 && b < h
}
