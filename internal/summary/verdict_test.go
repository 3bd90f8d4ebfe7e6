package summary

import (
	"strings"
	"testing"
)

func TestJudgeThreads(t *testing.T) {
	for _, tc := range []struct {
		name         string
		c            ThreadsCPU
		judged       bool
		starved      bool
		lacked, thin string
	}{
		{"one graph", ThreadsCPU{Graphs: 1, ThreadSeconds: 0.076, OnCPU: 0.07}, false, false, "",
			"not judged: 1 graph, 76 ms of thread time (a verdict needs 2 graphs and 100 ms)"},
		// tiny-dense's decode graphs under llama-bench: enough of them, each under a tick.
		{"graphs under a tick", ThreadsCPU{Graphs: 360, Wall: 0.094, ThreadSeconds: 0.19, OnCPU: 0.085}, false, false, "",
			"not judged: its graphs took 0.26 ms on average, shorter than the 4 ms scheduler tick at which the kernel counts a running thread's CPU time"},
		{"left out", ThreadsCPU{Perturbed: 1}, false, false, "",
			"not judged: 1 graph left out, run while profinfer attached or placed probes"},
		{"had its CPUs", ThreadsCPU{Graphs: 40, Wall: 1, ThreadSeconds: 2, OnCPU: 1.9}, true, false, "", ""},
		{"waited for a CPU", ThreadsCPU{Graphs: 40, Wall: 4, ThreadSeconds: 8, OnCPU: 1.8, Wait: 5}, true, true, LackedCPU, ""},
		{"no wait counted", ThreadsCPU{Graphs: 40, Wall: 4, ThreadSeconds: 8, OnCPU: 1.8}, true, true, LackedCPU, ""},
		{"asleep in faults", ThreadsCPU{Graphs: 10, Wall: 4, ThreadSeconds: 8, OnCPU: 3.5, Wait: 0.2, MajorFaults: 9000}, true, true, LackedDisk, ""},
		{"asleep", ThreadsCPU{Graphs: 10, Wall: 4, ThreadSeconds: 8, OnCPU: 3.5, Wait: 0.2, MajorFaults: 3}, true, true, LackedSleep, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.judge()
			if c.Judged != tc.judged || c.Starved != tc.starved || c.Lacked != tc.lacked || c.Thin != tc.thin {
				t.Errorf("judged %v starved %v lacked %q thin %q", c.Judged, c.Starved, c.Lacked, c.Thin)
			}
		})
	}
}

func TestJudgeOp(t *testing.T) {
	quiet := &ThreadsCPU{Graphs: 40, ThreadSeconds: 2, OnCPU: 1.95, Judged: true, Share: 0.97}
	starved := &ThreadsCPU{Graphs: 40, ThreadSeconds: 8, OnCPU: 1.8, Judged: true, Starved: true, Lacked: LackedCPU, Share: 0.22}
	disk := &ThreadsCPU{Graphs: 10, ThreadSeconds: 8, OnCPU: 3.5, Judged: true, Starved: true, Lacked: LackedDisk, Share: 0.44}
	thin := &ThreadsCPU{Graphs: 1, Thin: "not judged: 1 graph, 76 ms of thread time"}
	matmul := Op{Calls: 112, TotalMS: 12, MeanUS: 107, PeakFrac: 0.62, Roof: BoundMemory}
	slow := Op{Calls: 112, TotalMS: 60, MeanUS: 535, PeakFrac: 0.06, Roof: BoundCompute}
	small := Op{Calls: 33, TotalMS: 0.3, MeanUS: 9, PeakFrac: 0.02, Roof: BoundMemory}
	for _, tc := range []struct {
		name  string
		cpu   *ThreadsCPU
		op    Op
		simd  SIMD
		bound string
		why   string // a part of the reason
	}{
		{"near its roof", quiet, matmul, SIMD{}, BoundMemory, "62.0% of the bandwidth roof"},
		{"thin phase", thin, matmul, SIMD{}, "", "not judged: 1 graph"},
		{"few short calls", quiet, Op{Calls: 2, TotalMS: 0.01, MeanUS: 5, PeakFrac: 0.5, Roof: BoundCompute}, SIMD{}, "", "not judged: 2 calls"},
		{"one long call", quiet, Op{Calls: 1, TotalMS: 1.7, MeanUS: 1700, PeakFrac: 0.5, Roof: BoundMemory}, SIMD{}, BoundMemory, "50.0% of the bandwidth roof"},
		{"short calls", quiet, small, SIMD{}, BoundOverhead, "calls of 9.0 µs"},
		{"waited for a CPU", starved, small, SIMD{}, BoundStarved, "22% of their graphs' time (runnable, waiting for one)"},
		{"disk", disk, matmul, SIMD{}, BoundDisk, "waiting for the disk"},
		{"a build without the CPU's SIMD", quiet, slow, SIMD{Build: "sse3", Host: "avx512"}, BoundSIMD, "a build for sse3 on a CPU with avx512"},
		{"halfway, in a build without the CPU's SIMD", quiet, Op{Calls: 112, TotalMS: 12, MeanUS: 107, PeakFrac: 0.3, Roof: BoundMemory}, SIMD{Build: "sse2", Host: "avx512"}, BoundSIMD, "30.0% of the bandwidth roof, in a build for sse2"},
		{"near its roof, in a build without the CPU's SIMD", quiet, matmul, SIMD{Build: "avx2", Host: "avx512"}, BoundMemory, "62.0%"},
		{"unexplained", quiet, slow, SIMD{Build: "avx512", Host: "avx512"}, BoundUnexplained, "checked: threads on a CPU 97% of graph time, 0 major faults, built for avx512 as the CPU has"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ph := &Phase{CPU: tc.cpu, TracedGraphs: 1}
			o := tc.op
			bound, why := ph.judgeOp(&o, tc.simd)
			if bound != tc.bound || !strings.Contains(why, tc.why) {
				t.Errorf("%q: %s, want %q: …%s…", bound, why, tc.bound, tc.why)
			}
		})
	}
	// A phase whose only traced graph ran beside the collector's attach judges no op.
	ph := &Phase{CPU: quiet, TracedGraphs: 1, TracedPerturbed: 1}
	o := matmul
	if bound, why := ph.judgeOp(&o, SIMD{}); bound != "" || why != "not judged: its 1 traced graph ran while profinfer attached or placed probes" {
		t.Errorf("perturbed: %q %s", bound, why)
	}
	// A new context's first graph among the traced ones: an op far below its roofs is not
	// called unexplained; one near its roof still judged.
	for _, tc := range []struct {
		traced int64
		op     Op
		bound  string
		why    string
	}{
		{1, slow, "", "its one traced graph a new context's first, cold"},
		{3, slow, "", "1 of its 3 traced graphs a new context's first"},
		{1, matmul, BoundMemory, "62.0%"},
	} {
		ph := &Phase{CPU: quiet, TracedGraphs: tc.traced, TracedFirst: 1}
		o := tc.op
		if bound, why := ph.judgeOp(&o, SIMD{Build: "avx512", Host: "avx512"}); bound != tc.bound || !strings.Contains(why, tc.why) {
			t.Errorf("first graph among %d traced: %q %s, want %q: …%s…", tc.traced, bound, why, tc.bound, tc.why)
		}
	}
}
