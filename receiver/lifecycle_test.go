package receiver

import (
	"context"
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
