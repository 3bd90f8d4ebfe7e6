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

// Opening and closing sampling windows never puts the target's threads to sleep. Closing a
// perf-event uprobe that threads are running through makes each of them wait on the
// uprobe's lock for an RCU grace period (15-25 ms here, per probe); with uprobe_multi links
// they run on. The threads' states are polled from /proc while windows come and go, on
// the 1B model, whose long nodes showed the stall (on tiny-dense it did not show).
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
	blocked := map[string]int{} // wait channel -> polls that found a thread asleep in it
	for !bench.Exited() && ctx.Err() == nil {
		p.mu.Lock()
		traced = int(p.traced)
		p.mu.Unlock()
		if traced == 0 {
			time.Sleep(time.Millisecond) // model load: page faults may sleep
			continue
		}
		polls++
		for _, wchan := range uninterruptible(bench.PID()) {
			blocked[wchan]++
		}
	}
	if err := bench.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	windows := traced / cfg.Nodes.Graphs
	t.Logf("%d windows, %d polls of the threads' states, asleep uninterruptibly: %v", windows, polls, blocked)
	if windows < 10 {
		t.Fatalf("only %d sampling windows while llama-bench ran; the test needs 10", windows)
	}
	if len(blocked) > 0 {
		t.Errorf("target threads slept uninterruptibly while windows came and went: %v", blocked)
	}
}

// pageIn are the wait channels of a page fault reading the mmapped model from disk, which
// a loaded machine's page cache makes happen mid-run, probes or not.
var pageIn = map[string]bool{"folio_wait_bit_common": true, "io_schedule": true}

// uninterruptible returns the wait channels of pid's threads in state D, other than
// paging in. A wait channel of "0" is a thread that woke between the two reads: its sleep
// was too short to name, unlike the stall this looks for, which lasts milliseconds.
func uninterruptible(pid int) []string {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, _ := os.ReadDir(dir)
	var out []string
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
		out = append(out, string(wchan))
	}
	return out
}
