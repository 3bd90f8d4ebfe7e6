//go:build e2e

package profiler

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Opening and closing sampling windows never stalls the target's threads. Closing a
// perf-event uprobe that threads are running through makes each of them wait on the
// uprobe's lock for an RCU grace period (15-25 ms here, per probe); with uprobe_multi links
// they run on. Writing a breakpoint into the target's text holds its mmap lock, which a
// thread hitting a probe meanwhile waits for (find_active_uprobe_rcu): tens of
// microseconds, the price of any attach, so the test bounds how long a sleep lasts rather
// than forbidding one. The threads' states are polled from /proc while windows come and
// go, on the 1B model, whose long nodes showed the stall (on tiny-dense it did not show).
func TestWindowsNeverBlockTarget(t *testing.T) {
	requireRoot(t)
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := testConfig()
	cfg.Nodes = Nodes{Mode: NodesSampled, Interval: 20 * time.Millisecond, Graphs: 2}
	cfg.Layers.Barriers, cfg.Layers.Scheduler = false, false
	cfg.Targets = []Selector{{Executable: e.Bin("llama-bench")}}
	p := start(t, ctx, cfg, new(consumertest.TracesSink), new(consumertest.MetricsSink))
	defer p.Shutdown(ctx)
	if !p.bpf.Multi() {
		testbench.Missing(t, "uprobe_multi links (Linux 6.6)")
	}
	bench, err := testbench.Start(e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 0, 128, 2, 1)...)
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Stop()

	var polls, traced int
	asleep := map[string]sleep{}          // thread -> the uninterruptible sleep it is in
	longest := map[string]time.Duration{} // wait channel -> longest sleep seen in it
	for !bench.Exited() && ctx.Err() == nil {
		_, _, _, n := p.readerStats()
		traced = int(n)
		if traced == 0 {
			time.Sleep(time.Millisecond) // model load: page faults may sleep
			continue
		}
		polls++
		now := time.Now()
		found := uninterruptible(bench.PID())
		for tid, s := range asleep {
			if found[tid] != s.wchan {
				delete(asleep, tid)
			}
		}
		for tid, wchan := range found {
			s, ok := asleep[tid]
			if !ok {
				s = sleep{wchan, now}
				asleep[tid] = s
			}
			longest[wchan] = max(longest[wchan], now.Sub(s.since))
		}
	}
	if err := bench.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	windows := traced / cfg.Nodes.Graphs
	t.Logf("%d windows, %d polls of the threads' states, longest uninterruptible sleep by wait channel: %v", windows, polls, longest)
	if windows < 10 {
		t.Fatalf("only %d sampling windows while llama-bench ran; the test needs 10", windows)
	}
	for wchan, d := range longest {
		if d >= maxSleep {
			t.Errorf("a target thread slept uninterruptibly in %s for %v while windows came and went (bound %v)", wchan, d, maxSleep)
		}
	}
}

// maxSleep is the longest uninterruptible sleep a window may cost a target thread. With
// perf-event links this test saw 7.9 and 8.0 ms sleeps in handler_chain (two runs); with
// uprobe_multi links none it could time, and once, in CI, a few polls (each ~80 us apart)
// found threads waiting in find_active_uprobe_rcu.
const maxSleep = 5 * time.Millisecond

type sleep struct {
	wchan string
	since time.Time
}

// pageIn are the wait channels of a page fault reading the mmapped model from disk, which
// a loaded machine's page cache makes happen mid-run, probes or not.
var pageIn = map[string]bool{"folio_wait_bit_common": true, "io_schedule": true}

// uninterruptible returns the wait channels of pid's threads in state D, other than
// paging in, by thread. A wait channel of "0" is a thread that woke between the two reads:
// its sleep was too short to name, unlike the stall this looks for, which lasts
// milliseconds.
func uninterruptible(pid int) map[string]string {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, _ := os.ReadDir(dir)
	out := map[string]string{}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] != 'D' {
			continue
		}
		wchan, _ := os.ReadFile(filepath.Join(dir, task.Name(), "wchan"))
		if pageIn[string(wchan)] || string(wchan) == "0" {
			continue
		}
		out[task.Name()] = string(wchan)
	}
	return out
}
