package receiver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/testbench"
)

// lastGauge returns the last exported value of an int gauge.
func lastGauge(metrics []pmetric.Metrics, name string) (v int64, found bool) {
	eachMetric(metrics, name, func(m pmetric.Metric) {
		if m.Gauge().DataPoints().Len() > 0 {
			v, found = m.Gauge().DataPoints().At(0).IntValue(), true
		}
	})
	return v, found
}

// logged returns when the collector logged msg about pid, if it did.
func logged(c *collector, msg string, pid int) (time.Time, bool) {
	re := regexp.MustCompile(`(?m)^(\S+)\s+info\s+\S+\s+` + regexp.QuoteMeta(msg) + `\s+\{.*"pid": ` + strconv.Itoa(pid) + `[,}]`)
	m := re.FindStringSubmatch(c.proc.Stderr.String())
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1])
	return at, err == nil
}

// waitLogged waits up to limit past since for the collector to log msg about pid, and
// returns how long after since it did.
func waitLogged(t *testing.T, c *collector, msg string, pid int, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		if at, ok := logged(c, msg, pid); ok {
			return at.Sub(since)
		}
		if time.Since(since) > limit+time.Second {
			t.Fatalf("the collector did not log %q for pid %d within %s:\n%s", msg, pid, limit, c.proc.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A llama-server started after the collector, stopped and started again, is attached
// within a second each time, with no scan of /proc to find it; each exit detaches its
// probes; each process's spans carry its own PID.
func TestE2ERestartedServer(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-server"), "")
	var pids []int
	for round := range 2 {
		started := time.Now()
		s, err := e.StartServer(ctx, e.Bin("llama-server"), "tiny-dense", 2)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, s.PID())
		after := waitLogged(t, c, "attached", s.PID(), started, time.Second)
		if after > time.Second {
			t.Errorf("round %d: attached %s after the server started, want within 1 s", round, after)
		}
		if _, err := s.Complete(ctx, "Hello", 8); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		s.Stop()
		gone := waitLogged(t, c, "target exited; probes detached", s.PID(), stopped, time.Second)
		t.Logf("round %d: pid %d attached %s after start, detached %s after stop", round, s.PID(), after, gone)
	}
	time.Sleep(1500 * time.Millisecond) // a metrics export after the last exit
	traces, metrics := c.stop(t)
	if n, ok := lastGauge(metrics, "profinfer.probes.attached"); !ok || n != 0 {
		t.Errorf("profinfer.probes.attached = %d (exported: %v) after every target exited, want 0", n, ok)
	}
	decodes := map[int64]int{}
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			pid, _ := rs.Resource().Attributes().Get("process.pid")
			ss := rs.ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				for k := 0; k < ss.At(j).Spans().Len(); k++ {
					if ss.At(j).Spans().At(k).Name() == "llama_decode" {
						decodes[pid.Int()]++
					}
				}
			}
		}
	}
	for _, pid := range pids {
		if decodes[int64(pid)] == 0 {
			t.Errorf("no llama_decode spans for pid %d (by pid: %v)", pid, decodes)
		}
	}
	if len(decodes) != len(pids) {
		t.Errorf("llama_decode spans by pid %v, want exactly the servers' %v", decodes, pids)
	}
}

// A llama-bench whose executable and GGML libraries are replaced on disk while it runs,
// as a package upgrade replaces them, is still profiled: the files at those paths now are
// other programs, so the probes must go on the files the process maps (map_files).
func TestE2EReplacedBinary(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Dir(e.Bin("llama-bench"))+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the build: %v: %s", err, out)
	}
	exe := filepath.Join(dir, "llama-bench")
	// LD_LIBRARY_PATH: the build's RUNPATH names the original directory.
	bench, err := testbench.Start("env", append([]string{"LD_LIBRARY_PATH=" + dir, exe},
		e.BenchArgs("llama-1b-q4_0", 16, 16, 2, 8)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Stop()
	replaced := []string{"llama-bench", "libggml-base.so.0.25.1", "libggml-cpu.so.0.25.1", "libllama.so.0.5.0"}
	for !mapsAll(bench.PID(), dir, replaced) {
		if bench.Exited() || ctx.Err() != nil {
			t.Fatalf("llama-bench never mapped its libraries from %s: %s", dir, bench.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Replace each file as package managers do: write the new one aside, rename it over.
	other, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range replaced {
		tmp := filepath.Join(dir, ".new")
		if err := os.WriteFile(tmp, other, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	started := time.Now()
	c := startCollector(t, ctx, exe, fullTracing)
	waitLogged(t, c, "attached", bench.PID(), started, 10*time.Second)
	if err := bench.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)
	checkProfile(t, traces, metrics, 16)
	for _, s := range spans(traces) {
		if s.pid != int64(bench.PID()) {
			t.Fatalf("span %s from pid %d, want only llama-bench's %d", s.name, s.pid, bench.PID())
		}
	}
}

// mapsAll says whether process pid maps each of the named files in dir.
func mapsAll(pid int, dir string, names []string) bool {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false
	}
	for _, name := range names {
		if !bytes.Contains(maps, []byte(filepath.Join(dir, name)+"\n")) {
			return false
		}
	}
	return true
}
