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

// llama.cpp's test-backend-ops perf adds one MUL_MAT tensor to a graph many times: each
// computation is a node span of its own, with its own time, and the graph's
// ggml.graph.nodes.computed counts them all.
func TestE2ERepeatedNode(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := e.Bin("test-backend-ops")
	c := startCollector(t, ctx, bin, fullTracing)
	if _, err := testbench.Run(ctx, bin, "perf", "-o", "MUL_MAT", "-b", "CPU", "-p", "type_a=q4_0.*n=1,"); err != nil {
		t.Fatal(err)
	}
	traces, _ := c.stop(t)
	all := spans(traces)
	children := map[string][]span{}
	for _, s := range all {
		children[s.parent] = append(children[s.parent], s)
	}
	repeated := 0
	for _, g := range all {
		if g.name != "ggml.graph_compute" || g.attrs["ggml.graph.traced"] != true {
			continue
		}
		nodes, _ := g.attrs["ggml.graph.nodes"].(int64)
		computed, _ := g.attrs["ggml.graph.nodes.computed"].(int64)
		kids := children[g.id]
		if computed != nodes || int64(len(kids)) != computed {
			t.Errorf("graph of %d nodes: %d computed, %d node spans", nodes, computed, len(kids))
			continue
		}
		if nodes < 2 {
			continue
		}
		repeated++
		for i := 1; i < len(kids); i++ {
			if kids[i].start < kids[i-1].end-uint64(time.Millisecond) || kids[i].start == kids[i-1].start {
				t.Errorf("computations %d and %d of one tensor overlap: %+v, %+v", i-1, i, kids[i-1], kids[i])
				break
			}
		}
	}
	if repeated == 0 {
		t.Fatal("no traced graph that computes a tensor more than once")
	}
}
