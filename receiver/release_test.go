//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// A GGML process that cannot be profiled is not skipped in silence. Copies of node-llama-cpp
// 3.1.1's prebuilt (b3889, the CPU backend inside libggml.so) and 3.3.0's (b4234, a
// libggml-cpu.so of its own) with the local symbol ggml_compute_forward removed from the
// CPU backend leave no node probe point. The collector says so once at warn level with the
// process's PID, executable and reason, and counts it in profinfer.attach.failures under
// that reason.
func TestE2ENoNodeProbeNotSilent(t *testing.T) {
	e := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	if real, err := filepath.EvalSymlinks(node); err == nil {
		node = real // the executable as /proc/PID/exe names it
	}
	for _, c := range []struct{ nlc, cpu string }{{"3.1.1", "libggml.so"}, {"3.3.0", "libggml-cpu.so"}} {
		t.Run(c.nlc, func(t *testing.T) {
			if _, err := os.Stat(e.OldNodeDriver(c.nlc)); err != nil {
				testbench.Missing(t, err.Error())
			}
			dir := filepath.Join(t.TempDir(), "npm")
			lib := filepath.Join(dir, testbench.PrebuiltBins, c.cpu)
			for _, cmd := range [][]string{
				{"cp", "-a", filepath.Dir(e.OldNodeDriver(c.nlc)), dir},
				{"objcopy", "--strip-symbol=ggml_compute_forward", lib},
			} {
				if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", cmd, err, out)
				}
			}
			driver := filepath.Join(dir, "driver.mjs")
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
			// node-llama-cpp may also load the binding in a child process of its own, to
			// test it: every refused process is warned about once, and counted once.
			var warned []string
			refused := 0
			for _, l := range strings.Split(log, "\n") {
				if !strings.Contains(l, "GGML process not profiled") {
					continue
				}
				refused++
				if strings.Contains(l, fmt.Sprintf(`"pid": %d`, r.PID)) {
					warned = append(warned, l)
				}
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "\twarn\t") || !strings.Contains(warned[0], `"reason": "no_node_probe"`) ||
				!strings.Contains(warned[0], `"executable": "`+node) || !strings.Contains(warned[0], lib+", defines none of ggml_cpu_extra_compute_forward, ggml_compute_forward") {
				t.Fatalf("want one warning naming pid %d, %s, %s and no_node_probe; got %q\n%s", r.PID, node, lib, warned, log)
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
			if got != int64(refused) {
				t.Errorf("profinfer.attach.failures{reason=no_node_probe} = %d, want %d, one per warning", got, refused)
			}
		})
	}
}

// The release matrix: node-llama-cpp's prebuilts, a llama.cpp release each, from October
// 2024 to the newest (3.22.1's is TestE2ENodeLlamaCpp). Releases without ggml_version have
// their layout established from their code alone (ggml_tensor_overhead and the field
// getters), b3889's with ggml_tensor.grad in it; before ggml_cpu_extra_compute_forward
// (b3889, b4234) nodes are probed at the dispatcher. Each is profiled as a current release
// is, on the 1B Q4_0 model, and routes its MoE layers on the test bench's moe-q4_0
// (tiny-moe, from ggml 0.25.1's test-llama-archs, does not load in the older ones). One
// collector follows every release's dense run, another their MoE runs, as one collector
// follows a machine's processes of several layouts; each process is checked by its pid.
// (A collector each took 3.6 s of each run's 9: its start, its last export, its stop.)
func TestE2EReleases(t *testing.T) {
	e := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	releases := []struct {
		nlc, llama string
		versioned  bool // defines ggml_version
	}{
		{"3.1.1", "b3889", false}, // with ggml_tensor.grad, no CPU backend of its own: the dispatcher
		{"3.3.0", "b4234", false}, // a CPU backend of its own, still probed at the dispatcher
		{"3.6.0", "b4753", false}, // the release the ProfInfer paper pins (b4743) is next to it
		{"3.10.0", "b5640", false},
		{"3.12.0", "b6122", true},
		{"3.14.0", "b6673", true},
		{"3.18.0", "b8352", true},
		{"3.20.0", "b10361", true},
	}
	for _, r := range releases {
		if _, err := os.Stat(e.OldNodeDriver(r.nlc)); err != nil {
			testbench.Missing(t, err.Error())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// each runs every release's driver on model under one collector of settings, and says
	// what it exported once the last has ended.
	type ran struct {
		pid int
		res testbench.NodeResult
		err error
	}
	each := func(settings, model string, args ...string) (runs []ran, c *collector, traces []ptrace.Traces, metrics []pmetric.Metrics) {
		c = startCollector(t, ctx, node, settings)
		for _, r := range releases {
			p, err := testbench.Start(node, append([]string{e.OldNodeDriver(r.nlc), e.Model(model)}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			run := ran{pid: p.PID(), err: p.Wait(ctx)}
			if run.err == nil {
				run.res, run.err = testbench.ParseNode(p.Stdout.Bytes())
			}
			runs = append(runs, run)
		}
		time.Sleep(1500 * time.Millisecond)
		traces, metrics = c.stop(t)
		return runs, c, traces, metrics
	}

	runs, c, traces, metrics := each(fullTracing, "llama-1b-q4_0", "24", "2", "3")
	checkProfile(t, traces, metrics, 16) // every release's graphs
	for i, r := range releases {
		t.Run(r.nlc+"/"+r.llama, func(t *testing.T) {
			run := runs[i]
			if run.err != nil {
				t.Fatal(run.err)
			}
			traces, _ := ofPID(traces, nil, run.pid)
			checkNodeRequests(t, traces, 3, run.res.Tokens)
			v := resourceVersions(traces)
			unknown := slices.ContainsFunc(strings.Split(c.proc.Stderr.String(), "\n"), func(l string) bool {
				return strings.Contains(l, "\tattached\t") && strings.Contains(l, fmt.Sprintf(`"pid": %d,`, run.pid)) &&
					strings.Contains(l, `"ggml": "unknown"`)
			})
			switch {
			case len(v) != 1:
				t.Errorf("ggml.version on the resources: %q", v)
			case r.versioned && v[0] == "":
				t.Errorf("no ggml.version, though %s defines ggml_version", r.llama)
			case !r.versioned && (v[0] != "" || !unknown):
				t.Errorf("ggml.version %q; want none, and the attach log saying unknown", v[0])
			}
		})
	}

	// 64 tokens: enough selections a layer for moe-uneven to judge its routing.
	layers, used, experts := modelShape(t, e.Model("moe-q4_0"))
	runs, c, traces, metrics = each("nodes: {mode: all}", "moe-q4_0", "64", "2", "1")
	view := summarize(t, c.out)
	for i, r := range releases {
		t.Run(r.nlc+"/"+r.llama+"/moe-q4_0", func(t *testing.T) {
			run := runs[i]
			if run.err != nil {
				t.Fatal(run.err)
			}
			traces, metrics := ofPID(traces, metrics, run.pid)
			checkMoE(t, traces, metrics, layers, used, experts)
			checkUneven(t, &summary.View{Processes: []*summary.Process{byPID(t, view, run.pid)}}, true) // moe-q4_0's router, on another runtime
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

// Static builds of the releases before ggml_cpu_extra_compute_forward, with OpenMP where
// their prebuilts use ggml's own threadpool: llama-bench of b3889 and b4234, which make
// testenv builds from the source bundled with node-llama-cpp 3.1.1 and 3.3.0, GGML linked
// into the executable and probed at the dispatcher.
func TestE2EOldStaticBuilds(t *testing.T) {
	e := testbench.Require(t)
	for _, release := range []string{"b3889", "b4234"} {
		bench := e.OldStatic(release)
		t.Run(release, func(t *testing.T) {
			if _, err := os.Stat(bench); err != nil {
				testbench.Missing(t, err.Error())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c := startCollector(t, ctx, bench, fullTracing)
			// The collector attaches as llama-bench starts; --delay holds it after the
			// model's load, before any graph, so that no graph runs half-attached.
			if _, err := testbench.Run(ctx, bench, e.BenchArgs("llama-1b-q4_0", 16, 16, 2, 2, "--delay", "1")...); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			traces, metrics := c.stop(t)
			checkProfile(t, traces, metrics, 16) // the scheduler inlined the split call: each graph is its own
			checkBenchRequests(t, traces)        // llama_kv_cache_clear between runs
		})
		t.Run(release+"/moe-q4_0", func(t *testing.T) {
			if _, err := os.Stat(bench); err != nil {
				testbench.Missing(t, err.Error())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			layers, used, experts := modelShape(t, e.Model("moe-q4_0"))
			c := startCollector(t, ctx, bench, "nodes: {mode: all}")
			if _, err := testbench.Run(ctx, bench, e.BenchArgs("moe-q4_0", 8, 64, 2, 1, "--delay", "1")...); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			traces, metrics := c.stop(t)
			checkMoE(t, traces, metrics, layers, used, experts)
			checkUneven(t, summarize(t, c.out), true) // moe-q4_0's router, on another runtime
		})
	}
}
