package receiver

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/dag"
	"github.com/profinfer/profinfer/internal/testbench"
)

// collector is a running bin/otelcol-profinfer writing OTLP JSON lines to a file.
type collector struct {
	proc *testbench.Process
	out  string
}

// Receiver settings for tracing every node of every graph.
const fullTracing = "nodes: {mode: all}"

// startCollector runs the ocb-built collector with the profinfer receiver targeting exe
// and the file exporter, and waits until its pipelines are ready. settings are more
// receiver settings, as one YAML flow mapping's contents.
func startCollector(t *testing.T, ctx context.Context, exe, settings string) *collector {
	t.Helper()
	return startCollectorOf(t, ctx, []string{exe}, settings)
}

// startCollectorOf is startCollector with several target executables.
func startCollectorOf(t *testing.T, ctx context.Context, exes []string, settings string) *collector {
	t.Helper()
	return startCollectorTo(t, ctx, exes, settings, "")
}

// startCollectorTo is startCollectorOf with the spans sent to an otlphttp exporter with
// settings otlp (one YAML flow mapping's contents) instead of the file, when otlp is set.
func startCollectorTo(t *testing.T, ctx context.Context, exes []string, settings, otlp string) *collector {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	// The targets start after the collector, and no scan of /proc comes in the test's
	// time: the kernel hooks alone must find them.
	spans := "file"
	if otlp != "" {
		spans = "otlphttp"
	}
	p := runCollector(t, ctx, fmt.Sprintf(`
receivers:
  profinfer: {targets: [%s], discovery_interval: 1h, collection_interval: 1s, %s}
exporters:
  file:
    path: %q
  otlphttp: {%s}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces: {receivers: [profinfer], exporters: [%s]}
    metrics: {receivers: [profinfer], exporters: [file]}
`, executables(exes), settings, out, cmp.Or(otlp, "endpoint: http://127.0.0.1:1"), spans))
	return &collector{proc: p, out: out}
}

// executables selects exes as the receiver's targets, in YAML flow form.
func executables(exes []string) string {
	targets := make([]string, len(exes))
	for i, exe := range exes {
		targets[i] = fmt.Sprintf("{executable: %q}", exe)
	}
	return strings.Join(targets, ", ")
}

// runCollector starts the collector on the configuration text cfg and waits until its
// pipelines are ready.
func runCollector(t *testing.T, ctx context.Context, cfg string) *testbench.Process {
	t.Helper()
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root (eBPF)")
	}
	bin, _ := filepath.Abs("../bin/otelcol-profinfer")
	if _, err := os.Stat(bin); err != nil {
		testbench.Missing(t, "bin/otelcol-profinfer; run `make build`")
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := testbench.Start(bin, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	for !strings.Contains(p.Stderr.String(), "Everything is ready") {
		if p.Exited() || ctx.Err() != nil {
			t.Fatalf("collector did not start: %s", p.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

// stop ends the collector, which flushes, and reads everything it exported.
func (c *collector) stop(t *testing.T) ([]ptrace.Traces, []pmetric.Metrics) {
	t.Helper()
	c.proc.Stop()
	if !strings.Contains(c.proc.Stderr.String(), "attached") {
		t.Fatalf("the receiver never attached:\n%s", c.proc.Stderr.String())
	}
	return c.read(t, false)
}

// read parses what the collector exported so far. While it runs (running true), the
// last line may be half written, and is left for a later read.
func (c *collector) read(t *testing.T, running bool) ([]ptrace.Traces, []pmetric.Metrics) {
	t.Helper()
	raw, err := os.ReadFile(c.out)
	if err != nil && !(running && os.IsNotExist(err)) {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(raw, '\n'); running {
		raw = raw[:i+1]
	}
	var (
		traces  []ptrace.Traces
		metrics []pmetric.Metrics
	)
	for _, line := range bytes.Split(raw, []byte("\n")) {
		switch {
		case bytes.Contains(line[:min(len(line), 32)], []byte("resourceSpans")):
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
			if err != nil {
				t.Fatal(err)
			}
			traces = append(traces, td)
		case bytes.Contains(line[:min(len(line), 32)], []byte("resourceMetrics")):
			md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line)
			if err != nil {
				t.Fatal(err)
			}
			metrics = append(metrics, md)
		}
	}
	return traces, metrics
}

// span is the part of a span the assertions read.
type span struct {
	pid              int64 // of the resource
	name, parent, id string
	start, end       uint64
	attrs            map[string]any
	links            []string // span IDs
}

func spans(traces []ptrace.Traces) []span {
	var out []span
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			pid, _ := td.ResourceSpans().At(i).Resource().Attributes().Get("process.pid")
			ss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				ps := ss.At(j).Spans()
				for k := 0; k < ps.Len(); k++ {
					s := ps.At(k)
					sp := span{pid: pid.Int(), name: s.Name(), parent: s.ParentSpanID().String(), id: s.SpanID().String(),
						start: uint64(s.StartTimestamp()), end: uint64(s.EndTimestamp()), attrs: s.Attributes().AsRaw()}
					for l := 0; l < s.Links().Len(); l++ {
						sp.links = append(sp.links, s.Links().At(l).SpanID().String())
					}
					out = append(out, sp)
				}
			}
		}
	}
	return out
}

// eachMetric calls f for every exported metric called name, in export order.
func eachMetric(metrics []pmetric.Metrics, name string, f func(pmetric.Metric)) {
	for _, md := range metrics {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if ms.At(k).Name() == name {
						f(ms.At(k))
					}
				}
			}
		}
	}
}

// lastSum returns the last exported value of a sum metric.
func lastSum(metrics []pmetric.Metrics, name string) (v int64, found bool) {
	eachMetric(metrics, name, func(m pmetric.Metric) {
		if m.Sum().DataPoints().Len() > 0 {
			v, found = m.Sum().DataPoints().At(0).IntValue(), true
		}
	})
	return v, found
}

// maxPoint returns the largest value any data point of an int sum metric had.
func maxPoint(metrics []pmetric.Metrics, name string) (v int64) {
	eachMetric(metrics, name, func(m pmetric.Metric) {
		for d := 0; d < m.Sum().DataPoints().Len(); d++ {
			v = max(v, m.Sum().DataPoints().At(d).IntValue())
		}
	})
	return v
}

// checkProfile asserts what every profile of a llama model must show.
// It returns the graph spans.
func checkProfile(t *testing.T, traces []ptrace.Traces, metrics []pmetric.Metrics, layers int) []span {
	t.Helper()
	return checkProfileOf(t, traces, metrics, layers, true)
}

// checkProfileOf is checkProfile for a build that calls ggml_backend_graph_compute_async
// (splits true), or one whose scheduler inlined it (a static executable), where graphs
// sit directly under the scheduler call and no split spans exist.
func checkProfileOf(t *testing.T, traces []ptrace.Traces, metrics []pmetric.Metrics, layers int, splits bool) []span {
	t.Helper()
	all := spans(traces)
	phases := map[any]int{}
	mulmatLayers := map[int64]bool{}
	children := map[string][]span{}
	var graphs []span
	for _, s := range all {
		switch s.name {
		case "llama_decode":
			phases[s.attrs["llama.phase"]]++
		case "ggml.graph_compute":
			graphs = append(graphs, s)
		case "MUL_MAT":
			if s.attrs["ggml.tensor.name"] == "" {
				t.Errorf("MUL_MAT span without a tensor name: %v", s.attrs)
			}
			if l, ok := s.attrs["ggml.layer"].(int64); ok {
				mulmatLayers[l] = true
			}
		}
		children[s.parent] = append(children[s.parent], s)
	}
	if phases["prefill"] == 0 || phases["decode"] == 0 {
		t.Errorf("llama_decode spans by phase: %v, want both prefill and decode", phases)
	}
	for l := 0; l < layers; l++ {
		if !mulmatLayers[int64(l)] {
			t.Errorf("no MUL_MAT span for layer %d (layers seen: %v)", l, mulmatLayers)
		}
	}
	byID := map[string]span{}
	for _, s := range all {
		byID[s.id] = s
	}
	worst, late, traced := 1.0, 0.0, 0
	for _, g := range graphs {
		parent := byID[g.parent]
		if splits {
			if parent.name != "ggml.backend.graph_compute" || parent.attrs["ggml.backend"] != "CPU" {
				t.Errorf("graph span under %q (backend %v), want a CPU ggml.backend.graph_compute", parent.name, parent.attrs["ggml.backend"])
			}
			parent = byID[parent.parent]
		}
		if parent.name != "ggml.backend_sched.graph_compute" || byID[parent.parent].name != "llama_decode" {
			t.Errorf("graph's scheduler span %q under %q, want ggml.backend_sched.graph_compute under llama_decode", parent.name, byID[parent.parent].name)
		}
		if g.attrs["ggml.graph.traced"] != true {
			if len(children[g.id]) > 0 {
				t.Errorf("graph not traced whole has %d node spans", len(children[g.id]))
			}
			continue
		}
		traced++
		// Node spans are sequential, separated by barriers: from the first node's start
		// on, they tile the graph. Before it, thread 0 is setting the graph up, or was
		// preempted on a core the collector took (when a sampling window opens, the
		// collector attaches the node probes for a few milliseconds); no node runs, so
		// that time is reported, not required to be covered.
		ns := children[g.id]
		if len(ns) == 0 {
			t.Errorf("traced graph without node spans")
			continue
		}
		first, covered := ns[0].start, uint64(0)
		for _, n := range ns {
			first = min(first, n.start)
			covered += n.end - n.start
		}
		frac := float64(covered) / float64(g.end-first)
		worst = min(worst, frac)
		late = max(late, float64(first-g.start)/float64(g.end-g.start))
		if frac < 0.95 {
			t.Errorf("graph of %d nodes: node spans cover %.1f%% of it from its first node on, want >= 95%%", len(ns), 100*frac)
		}
	}
	if traced == 0 {
		t.Fatalf("no traced graph among %d graph spans", len(graphs))
	}
	if n, _ := lastSum(metrics, "profinfer.graphs.traced"); n != int64(traced) {
		dropped, _ := lastSum(metrics, "profinfer.spans.dropped")
		t.Errorf("profinfer.graphs.traced = %d, but %d traced graph spans were exported (%d spans dropped)", n, traced, dropped)
	}
	if d, ok := lastSum(metrics, "profinfer.events.dropped"); !ok || d != 0 {
		t.Errorf("profinfer.events.dropped = %d (exported: %v), want 0", d, ok)
	}
	t.Logf("%d spans, %d graphs (%d traced), phases %v, lowest node coverage of a traced graph %.1f%%, latest first node at %.1f%% of its graph",
		len(all), len(graphs), traced, phases, 100*worst, 100*late)
	return graphs
}

// llama-bench on the 1B Q4_0 model under the ocb-built collector.
func TestE2ELlamaBench(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), "nodes: {mode: all, barriers: true}")
	// -pg: a prompt, then tokens, in one context: the graph is rebuilt for each in the
	// same memory, and reused token after token.
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 32, 16, 2, 1, "-pg", "32,16")...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)
	checkProfile(t, traces, metrics, 16)
	checkShapes(t, traces)
	checkDAG(t, traces)
	// With the barrier probe every node span splits each thread's busy time from its wait.
	for _, s := range spans(traces) {
		if s.name != "MUL_MAT" {
			continue
		}
		busy, _ := s.attrs["ggml.thread.busy_ns"].([]any)
		if len(busy) != 2 || busy[0].(int64) <= 0 || busy[1].(int64) <= 0 || uint64(busy[0].(int64)) > s.end-s.start {
			t.Fatalf("MUL_MAT span busy time %v over %d ns, want 2 positive shares within it", busy, s.end-s.start)
		}
	}
}

// checkShapes asserts that every layer matmul but the last layer's has as many columns as
// its decode has tokens (the last computes only the rows whose logits are wanted). Thread
// 0 describes a graph's nodes once per build and names them by tensor after: a
// description kept past a rebuild would give a token the prompt's shapes.
func checkShapes(t *testing.T, traces []ptrace.Traces) {
	t.Helper()
	all := spans(traces)
	byID := map[string]span{}
	last := int64(0)
	for _, s := range all {
		byID[s.id] = s
		if l, ok := s.attrs["ggml.layer"].(int64); ok {
			last = max(last, l)
		}
	}
	phases := map[string]int{}
	for _, s := range all {
		if s.name == "ggml.node" {
			t.Fatalf("a node span without its description: %v", s.attrs)
		}
		if l, ok := s.attrs["ggml.layer"].(int64); s.name != "MUL_MAT" || !ok || l == last {
			continue
		}
		d := byID[s.parent]
		for d.name != "llama_decode" && d.parent != "" {
			d = byID[d.parent]
		}
		if d.name != "llama_decode" {
			continue
		}
		shape, _ := s.attrs["ggml.tensor.shape"].([]any)
		tokens := d.attrs["llama.batch.tokens"].(int64)
		if len(shape) != 4 || shape[1].(int64) != tokens {
			t.Fatalf("%s %s has shape %v in a decode of %d tokens", s.name, s.attrs["ggml.tensor.name"], shape, tokens)
		}
		phases[d.attrs["llama.phase"].(string)]++
	}
	if phases["prefill"] == 0 || phases["decode"] == 0 {
		t.Fatalf("layer matmuls checked by phase: %v, want both", phases)
	}
	t.Logf("layer matmul shapes match their decodes: %v", phases)
}

// checkDAG asserts that every traced graph's nodes link to their producers within the
// graph, and that its critical path is a chain of those links, no longer than the graph.
func checkDAG(t *testing.T, traces []ptrace.Traces) {
	t.Helper()
	all := spans(traces)
	children := map[string][]span{}
	for _, s := range all {
		children[s.parent] = append(children[s.parent], s)
	}
	graphs, linked, nodes := 0, 0, 0
	for _, g := range all {
		if g.name != "ggml.graph_compute" || g.attrs["ggml.graph.traced"] != true {
			continue
		}
		graphs++
		in := map[string]bool{}
		var path []span
		var pathNs uint64
		for _, n := range children[g.id] {
			in[n.id] = true
			nodes++
			if len(n.links) > 0 {
				linked++
			}
			for _, l := range n.links {
				if !in[l] {
					t.Fatalf("%s links to %s, not an earlier node of its graph", n.name, l)
				}
			}
			if n.attrs["ggml.critical_path"] == true {
				path = append(path, n)
				pathNs += n.end - n.start
			}
		}
		for i := 1; i < len(path); i++ {
			if !slices.Contains(path[i].links, path[i-1].id) {
				t.Fatalf("critical path: %s does not depend on the %s before it", path[i].name, path[i-1].name)
			}
		}
		// Its length counts each node to the next one's start: at most the spans' sum (they
		// overlap a little at barriers) and the graph.
		d, _ := g.attrs["ggml.critical_path.duration_ns"].(int64)
		if len(path) < 2 || d <= 0 || uint64(d) > pathNs || uint64(d) > g.end-g.start {
			t.Fatalf("critical path of %d nodes: %d ns (spans summed: %d ns), in a graph of %d ns", len(path), d, pathNs, g.end-g.start)
		}
	}
	// Every node but those reading only weights and inputs has a producer in its graph.
	if graphs == 0 || float64(linked) < 0.9*float64(nodes) {
		t.Fatalf("%d of %d node spans in %d graphs link to a producer", linked, nodes, graphs)
	}
	var dot strings.Builder
	if n, err := dag.DOT(&dot, traces, 0); n != 1 || err != nil || !strings.Contains(dot.String(), "color=red") {
		t.Fatalf("DOT of the first graph: %d graphs, %v:\n%.2000s", n, err, dot.String())
	}
	t.Logf("%d of %d node spans linked to producers in %d graphs", linked, nodes, graphs)
}

// Roofline classification without a PMU: decode matmuls stream their quantised weights
// and are memory-bound, at or near the measured bandwidth; prefill matmuls reach a far
// higher FLOP rate.
func TestE2ERoofline(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), fullTracing)
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 512, 16, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, _ := c.stop(t)
	all := spans(traces)
	byID := map[string]span{}
	for _, s := range all {
		byID[s.id] = s
	}
	phase := func(s span) any { // node → graph → split → scheduler → llama_decode
		return byID[byID[byID[byID[s.parent].parent].parent].parent].attrs["llama.phase"]
	}
	flops := map[any][]float64{}
	memory, decode := 0, 0
	for _, s := range all {
		src, _ := s.attrs["ggml.src"].([]any)
		if s.name != "MUL_MAT" || len(src) == 0 || !strings.HasPrefix(src[0].(string), "q4_0") {
			continue
		}
		ph := phase(s)
		flops[ph] = append(flops[ph], s.attrs["ggml.roofline.flops_per_second"].(float64))
		if ph != "decode" {
			continue
		}
		decode++
		if s.attrs["ggml.roofline.bound"] == "memory" {
			memory++
			// The peak is the start-up probe's copies; a kernel that only reads can beat
			// them by a few percent.
			if f := s.attrs["ggml.roofline.peak_fraction"].(float64); f > 1.1 {
				t.Errorf("decode %s moved %.2f times the measured peak bandwidth", s.attrs["ggml.tensor.name"], f)
			}
		}
	}
	if decode == 0 || len(flops["prefill"]) == 0 {
		t.Fatalf("q4_0 MUL_MAT spans: %d decode, %d prefill", decode, len(flops["prefill"]))
	}
	if float64(memory) < 0.9*float64(decode) {
		t.Errorf("%d of %d decode q4_0 MUL_MAT nodes are memory-bound, want at least 90%%", memory, decode)
	}
	pre, dec := median(flops["prefill"]), median(flops["decode"])
	if pre < 2*dec {
		t.Errorf("median MUL_MAT rate: prefill %.1f GFLOP/s, decode %.1f GFLOP/s; want prefill at least twice as high", pre/1e9, dec/1e9)
	}
	t.Logf("q4_0 MUL_MAT: %d decode nodes, %d memory-bound; median prefill %.1f GFLOP/s, decode %.1f GFLOP/s",
		decode, memory, pre/1e9, dec/1e9)
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// Beside a CPU hog on the same cores, the inference threads are preempted: nodes show
// their off-CPU time, run-queue wait and preemptions, never more off-CPU time than the
// node lasted on its followed thread.
func TestE2EOffCPU(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), fullTracing+", layers: {scheduler: true}")
	for range 2 { // one per core of a 2-core machine
		hog, err := testbench.Start("sh", "-c", "while :; do :; done")
		if err != nil {
			t.Fatal(err)
		}
		defer hog.Stop()
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

// The default configuration samples: node probes come and go in windows, every traced
// graph is whole, the others carry no nodes, and probes are back to the per-process set
// between windows.
func TestE2ESampledNodes(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-bench"), "nodes: {sample_interval: 200ms, sample_graphs: 3}")
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 32, 128, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	graphs := checkProfile(t, traces, metrics, 16)
	slices.SortFunc(graphs, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	traced, run, longest := 0, 0, 0
	for _, g := range graphs {
		if g.attrs["ggml.graph.traced"] != true {
			run = 0
			continue
		}
		traced++
		run++
		longest = max(longest, run)
	}
	// 128 decode graphs at ~20 ms take a few seconds: several windows, never all graphs.
	if traced < 6 || traced >= len(graphs)/2 {
		t.Errorf("%d of %d graphs traced, want at least two windows of 3 and well under half", traced, len(graphs))
	}
	// A window closes as its third graph is read, not at the reader's next tick.
	if longest > 3 {
		t.Errorf("%d graphs traced in a row, want windows of 3", longest)
	}
}

// The node-llama-cpp prebuilt: CET code, a CPU variant loaded with dlopen, ggml's own
// threadpool barrier.
func TestE2ENodeLlamaCpp(t *testing.T) {
	e := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, node, fullTracing)
	if _, err := testbench.Run(ctx, node, e.NodeArgs("llama-1b-q4_0", 24, 2, 3)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	checkProfile(t, traces, metrics, 16)
	// node-llama-cpp 3.22.1 ships ggml 0.25.1, which says so.
	if v := resourceVersions(traces); len(v) != 1 || v[0] != "0.25.1" {
		t.Errorf("ggml.version on the resources: %q, want 0.25.1", v)
	}
}

// A static llama-server: GGML and llama linked into the executable, found by its own
// symbols; prefill and decode both come through the server's request path.
func TestE2EStaticServer(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.StaticServer(), fullTracing)
	s, err := e.StartServer(ctx, e.StaticServer(), "llama-1b-q4_0", 2, "-lv", "4") // -lv 4: print the model info
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if _, err := s.Complete(ctx, "The quick brown fox jumps over the lazy dog", 16); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	// The static link inlined ggml_backend_graph_compute_async into the scheduler.
	checkProfileOf(t, traces, metrics, 16, false)
	checkModel(t, traces, s.Stdout.String()+s.Stderr.String())
}

// checkModel asserts that the model attributes on the resource say what llama.cpp printed
// when it loaded the file ("print_info: arch = llama" and so on).
func checkModel(t *testing.T, traces []ptrace.Traces, log string) {
	t.Helper()
	printed := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)print_info: (\S+(?: \S+)?)\s+= (.*)$`).FindAllStringSubmatch(log, -1) {
		printed[m[1]] = m[2]
	}
	if m := regexp.MustCompile(`threadpool init, n_threads = (\d+)`).FindStringSubmatch(log); m != nil {
		printed["n_threads"] = m[1]
	}
	if m := regexp.MustCompile(`llama_context: n_ctx\s+= (\d+)`).FindStringSubmatch(log); m != nil {
		printed["n_ctx"] = m[1]
	}
	if len(traces) == 0 || traces[0].ResourceSpans().Len() == 0 {
		t.Fatal("no spans")
	}
	res := traces[len(traces)-1].ResourceSpans().At(0).Resource().Attributes().AsRaw()
	params, _ := res["llama.model.parameters"].(int64)
	for attr, want := range map[string]string{
		"llama.model.architecture":   printed["arch"],
		"llama.model.file_type":      printed["file type"],
		"llama.model.name":           printed["general.name"],
		"llama.model.context_length": printed["n_ctx_train"],
		"llama.model.parameters":     printed["model params"],
		"llama.context.size":         printed["n_ctx"],
		"llama.context.threads":      printed["n_threads"],
	} {
		got := fmt.Sprint(res[attr])
		if attr == "llama.model.parameters" {
			got = fmt.Sprintf("%.2f B", float64(params)*1e-9)
		}
		if want == "" || got != want {
			t.Errorf("%s = %q, llama.cpp printed %q", attr, got, want)
		}
	}
	if p, _ := res["llama.model.path"].(string); !strings.HasSuffix(p, "llama-1b-q4_0.gguf") {
		t.Errorf("llama.model.path = %q", p)
	}
	for _, s := range spans(traces) {
		if s.name == "ggml.graph_compute" && fmt.Sprint(s.attrs["ggml.threads"]) != printed["n_threads"] {
			t.Fatalf("graph span ggml.threads = %v, llama.cpp printed n_threads = %q", s.attrs["ggml.threads"], printed["n_threads"])
		}
	}
}

// Without privileges the collector refuses to start and says what it needs.
func TestE2ENoPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root (to drop privileges from)")
	}
	bin, _ := filepath.Abs("../bin/otelcol-profinfer")
	if _, err := os.Stat(bin); err != nil {
		testbench.Missing(t, "bin/otelcol-profinfer; run `make build`")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testbench.Missing(t, "setpriv (util-linux)")
	}
	// An inline config: the unprivileged user cannot read the test's temporary directory.
	cfg := "yaml:{receivers: {profinfer: {}}, exporters: {debug: {}}, " +
		"service: {telemetry: {metrics: {level: none}}, pipelines: {traces: {receivers: [profinfer], exporters: [debug]}}}}"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", bin, "--config", cfg)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("collector started without privileges:\n%s", out)
	}
	if want := "profinfer needs root, or CAP_BPF and CAP_PERFMON"; !strings.Contains(string(out), want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
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
	time.Sleep(500 * time.Millisecond) // perf attaches
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
