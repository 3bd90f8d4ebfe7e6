//go:build e2e

package receiver

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Beside a CPU hog on the same cores, the inference threads are preempted: nodes show
// their off-CPU time, run-queue wait and preemptions, never more off-CPU time than the
// node lasted on its followed thread.
func TestE2EOffCPU(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), fullTracing+", layers: {scheduler: true}")
	for range 2 { // one per core of a 2-core machine
		testbench.BusyLoop(t, -1)
	}
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 0, 16, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	var interrupted, preempted int
	var off, runq int64
	for _, s := range spans(traces) {
		o, ok := s.attrs["ggml.sched.off_cpu_ns"].(int64)
		if !ok {
			continue
		}
		interrupted++
		off += o
		r, _ := s.attrs["ggml.sched.runqueue_ns"].(int64)
		runq += r
		if p, _ := s.attrs["ggml.sched.preemptions"].(int64); p > 0 {
			preempted++
		}
		if uint64(o) > s.end-s.start {
			t.Errorf("%s off CPU %d ns, longer than its %d ns", s.name, o, s.end-s.start)
		}
		if r > o {
			t.Errorf("%s waited %d ns in the run queue, more than its %d ns off CPU", s.name, r, o)
		}
	}
	if interrupted == 0 || preempted == 0 || runq == 0 {
		t.Fatalf("beside a CPU hog: %d nodes off CPU, %d preempted, %d ns in the run queue; want all nonzero", interrupted, preempted, runq)
	}
	if n := maxPoint(metrics, "ggml.op.preemptions"); n == 0 {
		t.Error("no op has ggml.op.preemptions above 0")
	}
	t.Logf("%d nodes interrupted (%d preempted): %.1f ms off CPU, %.1f ms of it in the run queue", interrupted, preempted, float64(off)/1e6, float64(runq)/1e6)
}

type counterKey struct {
	tid     int64
	counter string
}

// counterExport is one export of ggml.thread.counter: node and outside summed, and
// outside alone, per thread and counter.
type counterExport struct {
	at     time.Time
	totals map[counterKey]int64
	out    map[counterKey]int64
}

func threadCounterExports(metrics []pmetric.Metrics) []counterExport {
	var exports []counterExport
	eachMetric(metrics, "ggml.thread.counter", func(m pmetric.Metric) {
		x := counterExport{totals: map[counterKey]int64{}, out: map[counterKey]int64{}}
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			dp := m.Sum().DataPoints().At(i)
			tid, _ := dp.Attributes().Get("thread.id")
			name, _ := dp.Attributes().Get("perf.counter")
			scope, _ := dp.Attributes().Get("ggml.scope")
			k := counterKey{tid.Int(), name.Str()}
			x.at = dp.Timestamp().AsTime()
			x.totals[k] += dp.IntValue()
			if scope.Str() == "outside" {
				x.out[k] += dp.IntValue()
			}
		}
		exports = append(exports, x)
	})
	return exports
}

// Perf counters per node, reconciled with perf stat: for each inference thread of a
// llama-server, the counts profinfer attributes to nodes plus those outside nodes, over
// a window of requests, match what perf stat counts for the same thread over the same
// window. The hardware counters asked for too are reported missing where the machine has
// no PMU, and the software ones still arrive.
func TestE2ECounters(t *testing.T) {
	e := testbench.Require(t)
	perf, err := exec.LookPath("perf")
	if err != nil {
		testbench.Missing(t, "perf (linux-perf)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// No polling for work between graphs: an idle worker that spins yields the CPU to
	// whatever else runs (this test, parsing the collector's output), and those switches
	// fall in the thread's time outside nodes from its last graph before perf stat starts
	// to its first after: profinfer's window, but not all of it perf's.
	s, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2, "--poll", "0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := startCollector(t, ctx, e.Bin("llama-server"),
		"nodes: {mode: all}, counters: [task-clock, context-switches, page-faults, cpu-migrations, cycles, instructions]")
	for !strings.Contains(c.proc.Stderr.String(), "attached") {
		if ctx.Err() != nil {
			t.Fatalf("never attached: %s", c.proc.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Warm up: the receiver opens each inference thread's counters as it first sees it,
	// and they count from the thread's next node on.
	for range 2 {
		if _, err := s.Complete(ctx, "Warm up", 8); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Idle until every count of the warm-up has been exported: two exports in a row with
	// the same totals. A count still in flight when perf stat starts would be profinfer's
	// and not perf's: the reader delivers a decode up to a second after it, and the export
	// follows up to a second later, more when the machine is busy.
	warmed := time.Now()
	for deadline := warmed.Add(30 * time.Second); ; time.Sleep(time.Second) {
		_, ms := c.read(t, true)
		if x := threadCounterExports(ms); len(x) >= 2 && x[len(x)-2].at.After(warmed) && maps.Equal(x[len(x)-1].totals, x[len(x)-2].totals) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the thread counters did not settle after the warm-up")
		}
	}
	before := time.Now()
	out := filepath.Join(t.TempDir(), "perf.csv")
	ps, err := testbench.Start(perf, "stat", "--per-thread", "-x", ",", "-o", out,
		"-e", "task-clock,context-switches", "-p", strconv.Itoa(s.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if err := testbench.WaitPerf(ps.PID(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Long enough that the window's edges weigh little: a few switches on either side
	// (the idle gap before perf stat's start is profinfer's, the one before its end is
	// perf's) came to 7 of a worker's 93 over 48 tokens.
	for range 4 {
		if _, err := s.Complete(ctx, "The quick brown fox jumps over the lazy dog", 48); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // idle again: the threads stop spinning
	_ = syscall.Kill(ps.PID(), syscall.SIGINT)
	_ = ps.Wait(ctx) // perf stat prints its counts, then dies of the SIGINT
	traces, metrics := c.stop(t)

	// profinfer's per-thread counts over the window: the final export minus the last
	// export before perf stat started.
	end, outside := map[counterKey]int64{}, map[counterKey]int64{}
	exports := threadCounterExports(metrics)
	if len(exports) < 2 {
		t.Fatalf("%d exports of ggml.thread.counter", len(exports))
	}
	first, last := exports[0], exports[len(exports)-1]
	for _, x := range exports {
		if x.at.Before(before) {
			first = x
		}
	}
	if !first.at.Before(before) {
		for _, x := range exports {
			t.Log(x.at, x.totals)
		}
		t.Fatalf("no ggml.thread.counter export before perf stat started at %s", before)
	}
	for k, v := range last.totals {
		end[k] = v - first.totals[k]
		outside[k] = last.out[k] - first.out[k]
	}

	// perf stat --per-thread -x,: comm-tid,value,unit,event,...
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	perfCount := map[counterKey]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 4 || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(f[0], '-')
		tid, err1 := strconv.ParseInt(f[0][i+1:], 10, 64)
		v, err2 := strconv.ParseFloat(f[1], 64)
		if i < 0 || err1 != nil || err2 != nil {
			continue
		}
		if f[3] == "task-clock" && f[2] == "msec" {
			v *= 1e6 // profinfer counts task-clock in ns
		}
		perfCount[counterKey{tid, f[3]}] = v
	}
	checked := 0
	for _, counter := range []string{"task-clock", "context-switches"} {
		for k, got := range end {
			if k.counter != counter || end[counterKey{k.tid, "task-clock"}] < 1e8 { // inference threads: busy for 0.1 s at least
				continue
			}
			want := perfCount[k]
			slack := 0.05 * want
			if counter == "context-switches" {
				slack = max(slack, 3) // a few switches on either side of the window
			}
			t.Logf("thread %d %s: profinfer %d (%.1f%% outside nodes), perf stat %.0f (%+.0f)", k.tid, counter, got,
				100*float64(outside[k])/float64(max(got, 1)), want, float64(got)-want)
			if d := float64(got) - want; d > slack || d < -slack {
				t.Errorf("thread %d %s: profinfer attributes %d, perf stat counted %.0f", k.tid, counter, got, want)
			}
			checked++
		}
	}
	if checked < 4 {
		t.Fatalf("reconciled %d thread counters, want task-clock and context-switches of 2 threads; perf stat: %s", checked, raw)
	}

	// Node spans carry the software counters, never more CPU time than their threads
	// had wall time: in all, and span by span up to 1 ms. A thread's counters are read a
	// moment after its timestamp (a mid-graph node once came out 108 µs over in some
	// 10 000), and a worker's share of a graph's last node runs on to its own exit from
	// the graph, which the graph's end does not wait for (1-4 µs, once 104).
	counted := 0
	var clock, wall uint64
	for _, sp := range spans(traces) {
		tc, ok := sp.attrs["perf.task_clock"].(int64)
		if !ok || sp.name != "MUL_MAT" {
			continue
		}
		counted++
		if _, ok := sp.attrs["perf.page_faults"]; !ok {
			t.Errorf("MUL_MAT span without perf.page_faults: %v", sp.attrs)
		}
		clock, wall = clock+uint64(tc), wall+2*(sp.end-sp.start)
		if uint64(tc) > 2*(sp.end-sp.start)+1_000_000 {
			t.Errorf("MUL_MAT span %v of %d ns on 2 threads has %d ns of task-clock", sp.attrs["ggml.tensor.name"], sp.end-sp.start, tc)
		}
	}
	if clock > wall {
		t.Errorf("MUL_MAT spans on 2 threads: %d ns of task-clock in twice %d ns", clock, wall/2)
	}
	if counted == 0 {
		t.Error("no MUL_MAT span has perf.task_clock")
	}
	// The hardware counters: where perf itself cannot count cycles, profinfer says so once
	// and goes on.
	probe, _ := exec.CommandContext(ctx, perf, "stat", "-x", ",", "-e", "cycles", "--", "true").CombinedOutput()
	warning := "perf counters unavailable, continuing without them: cycles ("
	if strings.Contains(string(probe), "<not supported>") {
		if n := strings.Count(c.proc.Stderr.String(), warning); n != 1 {
			t.Errorf("warning %q logged %d times:\n%s", warning, n, c.proc.Stderr.String())
		}
	}
}
