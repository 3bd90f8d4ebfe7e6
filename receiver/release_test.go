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
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/testbench"
)

// A llama.cpp too old to profile is not skipped in silence: node-llama-cpp 3.1.1's
// prebuilt (b3889, the CPU backend inside libggml.so) and 3.3.0's (b4234, a libggml-cpu.so
// of its own), neither with ggml_cpu_extra_compute_forward. The collector says so once at
// warn level with the process's PID, executable and reason, and counts it in
// profinfer.attach.failures under that reason.
func TestE2EOldReleaseNotSilent(t *testing.T) {
	e := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	if real, err := filepath.EvalSymlinks(node); err == nil {
		node = real // the executable as /proc/PID/exe names it
	}
	for _, v := range []string{"3.1.1", "3.3.0"} {
		t.Run(v, func(t *testing.T) {
			driver := e.OldNodeDriver(v)
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
			if len(warned) != 1 || !strings.Contains(warned[0], "\twarn\t") || !strings.Contains(warned[0], `"reason": "no_node_probe"`) ||
				!strings.Contains(warned[0], `"executable": "`+node) {
				t.Fatalf("want one warning naming pid %d, %s and no_node_probe; got %q\n%s", r.PID, node, warned, log)
			}
			_, metrics := c.read(t, false)
			var got int64 = -1
			eachMetric(metrics, "profinfer.attach.failures", func(m pmetric.Metric) {
				for i := 0; i < m.Sum().DataPoints().Len(); i++ {
					dp := m.Sum().DataPoints().At(i)
					if v, _ := dp.Attributes().Get("profinfer.attach.reason"); v.Str() == "no_node_probe" {
						got = dp.IntValue()
					}
				}
			})
			if got != 1 {
				t.Errorf("profinfer.attach.failures{reason=no_node_probe} = %d, want 1", got)
			}
		})
	}
}

// node-llama-cpp 3.6.0's and 3.10.0's prebuilts ship llama.cpp b4753 (the paper pins
// b4743) and b5640: no ggml_version, so their layout is established from their code alone
// (ggml_tensor_overhead and the field getters), and they are profiled as a current
// release is.
func TestE2EReleasesWithoutVersion(t *testing.T) {
	e := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	for _, v := range []string{"3.6.0", "3.10.0"} {
		t.Run(v, func(t *testing.T) {
			driver := e.OldNodeDriver(v)
			if _, err := os.Stat(driver); err != nil {
				testbench.Missing(t, err.Error())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c := startCollector(t, ctx, node, fullTracing)
			if _, err := testbench.Run(ctx, node, driver, e.Model("llama-1b-q4_0"), "24", "2", "3"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			traces, metrics := c.stop(t)
			if !strings.Contains(c.proc.Stderr.String(), `"ggml": "unknown"`) {
				t.Errorf("attached without saying the version is unknown:\n%s", c.proc.Stderr.String())
			}
			if v := resourceVersions(traces); len(v) != 1 || v[0] != "" {
				t.Errorf("ggml.version on the resources: %q, want none", v)
			}
			checkProfile(t, traces, metrics, 16)
		})
		// tiny-moe, from ggml 0.25.1's test-llama-archs, does not load in these releases;
		// the test bench's own MoE, written by internal/testbench, does.
		t.Run(v+"/moe-q4_0", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			layers, used, experts := modelShape(t, e.Model("moe-q4_0"))
			c := startCollector(t, ctx, node, "nodes: {mode: all}")
			if _, err := testbench.Run(ctx, node, e.OldNodeDriver(v), e.Model("moe-q4_0"), "8", "2", "1"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			traces, metrics := c.stop(t)
			checkMoE(t, traces, metrics, layers, used, experts)
		})
	}
}

// resourceVersions lists the distinct ggml.version values of the span resources, "" for
// resources without one.
func resourceVersions(traces []ptrace.Traces) []string {
	seen := map[string]bool{}
	var out []string
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			s := ""
			if v, ok := td.ResourceSpans().At(i).Resource().Attributes().Get("ggml.version"); ok {
				s = v.AsString()
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}
