package roofline

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// The roofs are measured with the vectors /proc/cpuinfo lists, never wider: an AVX-512
// CPU whose kernel lists AVX2 alone gets AVX2's kernels.
func TestKernelsListed(t *testing.T) {
	defer func(f func() []string) { hostFlags = f }(hostFlags)
	hostFlags = func() []string { return []string{"sse2", "avx", "avx2", "fma"} }
	want := "scalar" // a CPU without AVX2 and FMA: the listing adds nothing
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		want = "avx2"
	}
	fma, _, _ := fmaKernel()
	dot, _, _ := dotKernel()
	bf16, _, _ := bf16Kernel()
	if fma != want || dot != want || bf16 != "" {
		t.Errorf("kernels %q, %q, %q with AVX2 listed, want %s, %s and none", fma, dot, bf16, want, want)
	}
	// Where /proc/cpuinfo cannot be read, cpuid decides.
	hostFlags = func() []string { return nil }
	if fma, _, _ := fmaKernel(); cpu.X86.HasAVX512F && fma != "avx512" {
		t.Errorf("kernel %q with nothing listed on an AVX-512 CPU, want avx512", fma)
	}
}
