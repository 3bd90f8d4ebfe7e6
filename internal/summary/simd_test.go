package summary

import "testing"

// A process's SIMD, built for and the CPU's, is read from its resource; a batch whose
// resource lacks it does not erase it.
func TestSIMD(t *testing.T) {
	o := *server
	o.SIMD, o.HostSIMD = "sse2", "avx512_vnni"
	a := New()
	a.Traces(traces(&o, decodeOf(1, 1000, node("MUL_MAT", "ffn_up-0", "q4_0", 1010, 1020, 1, 1))))
	a.Traces(traces(server, decodeOf(1, 2000, node("MUL_MAT", "ffn_up-0", "q4_0", 2010, 2020, 1, 1))))
	if got := a.Snapshot().Processes[0].SIMD; got != (SIMD{Build: "sse2", Host: "avx512_vnni"}) {
		t.Errorf("SIMD %+v", got)
	}
}
