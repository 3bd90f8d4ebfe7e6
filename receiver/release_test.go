package receiver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/testbench"
)

// A llama.cpp too old to profile (node-llama-cpp 3.6.0's prebuilt, release b4753, has no
// ggml_version) is not skipped in silence: the collector says so once at warn level with
// the process's PID, executable and reason, and counts it in profinfer.attach.failures
// under that reason.
func TestE2EOldReleaseNotSilent(t *testing.T) {
	e := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	if real, err := filepath.EvalSymlinks(node); err == nil {
		node = real // the executable as /proc/PID/exe names it
	}
	driver := e.OldNodeDriver("3.6.0")
	if _, err := os.Stat(driver); err != nil {
		testbench.Missing(t, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, node, "")
	out, err := testbench.Run(ctx, node, driver, e.Model("llama-1b-q4_0"), "16", "2", "2")
	if err != nil {
		t.Fatal(err)
	}
	r, err := testbench.ParseNode(out)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	c.proc.Stop()
	log := c.proc.Stderr.String()
	var warned []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "GGML process not profiled") && strings.Contains(l, fmt.Sprintf(`"pid": %d`, r.PID)) {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "\twarn\t") || !strings.Contains(warned[0], `"reason": "unknown_version"`) ||
		!strings.Contains(warned[0], `"executable": "`+node) {
		t.Fatalf("want one warning naming pid %d, %s and unknown_version; got %q\n%s", r.PID, node, warned, log)
	}
	_, metrics := c.read(t, false)
	var got int64 = -1
	eachMetric(metrics, "profinfer.attach.failures", func(m pmetric.Metric) {
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			dp := m.Sum().DataPoints().At(i)
			if v, _ := dp.Attributes().Get("profinfer.attach.reason"); v.Str() == "unknown_version" {
				got = dp.IntValue()
			}
		}
	})
	if got != 1 {
		t.Errorf("profinfer.attach.failures{reason=unknown_version} = %d, want 1", got)
	}
}
