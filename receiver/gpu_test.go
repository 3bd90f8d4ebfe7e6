//go:build e2e

package receiver

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/page"
	"github.com/profinfer/profinfer/internal/perfetto"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// A GPU backend, tested on Vulkan: node-llama-cpp's Vulkan prebuilt on Mesa's software
// driver, lavapipe. ggml-vulkan queues a split's work and returns; the split ends when the
// CPU's wait for the backend does, and its nodes are read from the graph it was handed.

// vulkanRun profiles one run of the node driver on the Vulkan prebuilt with receiver
// settings, and returns its spans and the process's summary with its findings.
func vulkanRun(t *testing.T, v testbench.Vulkan, settings string) ([]ptrace.Traces, []pmetric.Metrics, *summary.Process) {
	t.Helper()
	traces, metrics, p, _ := vulkanRunStderr(t, v, settings)
	return traces, metrics, p
}

// vulkanRunStderr is vulkanRun, returning the driver's stderr too.
func vulkanRunStderr(t *testing.T, v testbench.Vulkan, settings string) ([]ptrace.Traces, []pmetric.Metrics, *summary.Process, []byte) {
	t.Helper()
	return vulkanRunThen(t, v, settings, nil)
}

// vulkanRunThen is vulkanRunStderr, calling opened, where not nil, once the gate is open.
func vulkanRunThen(t *testing.T, v testbench.Vulkan, settings string, opened func(*collector, *testbench.Process)) ([]ptrace.Traces, []pmetric.Metrics, *summary.Process, []byte) {
	t.Helper()
	e := testbench.Require(t)
	e.RequireVulkan(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	// The driver waits to be attached: a decode begun before the probes came would
	// spend the first sampling window on a graph whose device split is not its own.
	var started func(c *collector, p *testbench.Process)
	if !v.Ungated {
		v.Gate = filepath.Join(t.TempDir(), "go")
		started = func(c *collector, p *testbench.Process) {
			openGate(t, c, p.PID(), v.Gate) // env execs node
			if opened != nil {
				opened(c, p)
			}
		}
	}
	name, args := v.Command(e, node)
	run := profileRun(t, 5*time.Minute, node, settings, started, name, args...)
	r, err := testbench.ParseNode(run.proc.Stdout.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d tokens in %.1f s", v.Model, r.Tokens, r.Seconds)
	return run.traces, run.metrics, run.summary, run.proc.Stderr.Bytes()
}

// deviceSpans are the ggml.device.compute spans, their events the nodes described.
func deviceSpans(traces []ptrace.Traces) []span {
	var out []span
	for _, s := range spans(traces) {
		if s.name == "ggml.device.compute" {
			out = append(out, s)
		}
	}
	return out
}

func findingIDs(p *summary.Process) []string {
	var ids []string
	for _, f := range p.Findings {
		ids = append(ids, f.ID+": "+f.Title+" ("+strings.Join(f.Evidence, "; ")+")")
	}
	return ids
}

func fired(p *summary.Process, id string) bool {
	return slices.ContainsFunc(p.Findings, func(f summary.Finding) bool { return f.ID == id })
}

// Every layer on the GPU, dense and MoE: the device's time on each split from the CPU's
// waits, its nodes read from the graph (MUL_MAT_ID for the MoE model's experts), the CPU
// left with the embedding rows alone, and no finding about the offload.
func TestE2EVulkanOffload(t *testing.T) {
	for _, tc := range []struct{ model, op string }{{"tiny-dense", "MUL_MAT"}, {"tiny-moe", "MUL_MAT_ID"}} {
		t.Run(tc.model, func(t *testing.T) {
			traces, metrics, p := vulkanRun(t, testbench.Vulkan{Model: tc.model, Tokens: 24, Runs: 4, Layers: -1, Threads: 2}, fullTracing)
			devs := deviceSpans(traces)
			splits := map[any]int{}
			cpuOps := map[any]int{}
			for _, s := range spans(traces) {
				switch {
				case s.name == "ggml.backend.graph_compute":
					splits[s.attrs["ggml.backend"]]++
				case s.attrs["ggml.op"] != nil:
					cpuOps[s.attrs["ggml.op"]]++
				}
			}
			t.Logf("splits %v, %d device spans, CPU node ops %v, backends %+v, loaded %v", splits, len(devs), cpuOps, p.Backends, p.Loaded)
			if splits["VK"] == 0 || len(devs) < splits["VK"]/2 {
				t.Fatalf("%d device spans for %d Vulkan splits", len(devs), splits["VK"])
			}
			described, waited := 0, 0
			for _, d := range devs {
				wait, _ := d.attrs["ggml.device.wait_ns"].(int64)
				nodes, _ := d.attrs["ggml.graph.nodes"].(int64)
				if d.attrs["ggml.backend"] != "VK" || d.end < d.start || wait < 0 || uint64(wait) > d.end-d.start {
					t.Errorf("device span %v from %d to %d", d.attrs, d.start, d.end)
				}
				if wait > 0 && d.attrs["ggml.device.end_bound"] == false {
					waited++
				}
				if len(d.events) > 0 {
					described++
					if int64(len(d.events)) != nodes || !slices.Contains(d.events, tc.op) {
						t.Errorf("device span of %d nodes described with %d: %v", nodes, len(d.events), d.events)
					}
				}
			}
			if described == 0 || waited == 0 {
				t.Errorf("of %d device spans, %d had their nodes described, %d ended in a wait", len(devs), described, waited)
			}
			for op := range cpuOps {
				if op != "GET_ROWS" {
					t.Errorf("a full offload computed %v on the CPU: %v", op, cpuOps)
				}
			}
			// The metrics sum what the device spans carry (the last export of a cumulative sum).
			var deviceSecs, waitSecs float64
			for _, m := range [...]struct {
				name string
				to   *float64
			}{{"ggml.backend.device.time", &deviceSecs}, {"ggml.backend.device.wait", &waitSecs}} {
				eachMetric(metrics, m.name, func(mm pmetric.Metric) {
					for i := 0; i < mm.Sum().DataPoints().Len(); i++ {
						dp := mm.Sum().DataPoints().At(i)
						if b, _ := dp.Attributes().Get("ggml.backend"); b.Str() == "VK" {
							*m.to = dp.DoubleValue()
						}
					}
				})
			}
			var spanSecs float64
			for _, d := range devs {
				spanSecs += float64(d.end-d.start) / 1e9
			}
			if deviceSecs <= 0 || waitSecs <= 0 || waitSecs > deviceSecs || math.Abs(deviceSecs-spanSecs) > 0.01*spanSecs {
				t.Errorf("ggml.backend.device.time %.3f s, .wait %.3f s; the device spans add up to %.3f s", deviceSecs, waitSecs, spanSecs)
			}
			if !slices.Contains(p.Loaded, "vulkan") {
				t.Errorf("backends loaded %v, want vulkan", p.Loaded)
			}
			if fired(p, "cpu-fallback") || fired(p, "device-unused") {
				t.Errorf("findings on a full offload: %v", findingIDs(p))
			}
			checkDeviceFindings(t, p, "full")
			checkTimelineDevice(t, p, false)
		})
	}
}

// A short job fully offloaded, as llama-cli -n 16 or a batch job runs one: the device
// probes come with the attach, since the process loaded ggml-vulkan, so every Vulkan
// split of its 16 tokens has the device's work, and, the perf logger on, the device's
// own time for its nodes. They once came with the first split the reader saw, and a job
// this short could end with none. The device runs in the process's own threads
// (lavapipe): the resource says so.
func TestE2EVulkanShortJob(t *testing.T) {
	traces, _, p := vulkanRun(t, testbench.Vulkan{Model: "tiny-dense", Tokens: 16, Runs: 1, Layers: -1, Threads: 2, PerfLogger: true, Ungated: true}, fullTracing)
	all := spans(traces)
	splits, timed := 0, 0
	devices := map[string]span{} // by parent: the split
	for _, s := range all {
		if s.name == "ggml.device.compute" {
			devices[s.parent] = s
			if n, _ := s.attrs["ggml.graph.nodes.timed"].(int64); n > 0 {
				timed++
			}
		}
	}
	for _, s := range all {
		if s.name != "ggml.backend.graph_compute" || s.attrs["ggml.backend"] != "VK" {
			continue
		}
		splits++
		if _, ok := devices[s.id]; !ok {
			t.Errorf("a Vulkan split at %d has no device work", s.start)
		}
	}
	t.Logf("%d Vulkan splits, %d device spans, %d with the device's node times", splits, len(devices), timed)
	// The attach races the job's first decodes, a short job's being its model's load.
	if splits < 8 || timed != len(devices) {
		t.Errorf("%d Vulkan splits for 16 tokens; %d of %d device spans with the device's node times", splits, timed, len(devices))
	}
	software := map[string]bool{}
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			if v, ok := td.ResourceSpans().At(i).Resource().Attributes().Get("ggml.device.software"); ok {
				software[v.AsString()] = true
			}
		}
	}
	if !software["lavapipe"] {
		t.Errorf("ggml.device.software %v, want lavapipe", software)
	}
	checkTimelineDevice(t, p, false)
}

// A short job's device is known for lavapipe though the job has exited when its records
// are read: the collector is stopped (SIGSTOP) from the attach until the job's exit,
// its threads gone. The device is made (lavapipe's threads named) before the attach,
// read then, or after it, sent as each thread takes its name. Both came from the
// threads of a live process once, and a short job's spans could carry neither.
func TestE2EVulkanShortJobReadLate(t *testing.T) {
	for _, before := range []bool{false, true} {
		name := "device made before attach"
		if before {
			name = "device made after attach"
		}
		t.Run(name, func(t *testing.T) {
			v := testbench.Vulkan{Model: "tiny-dense", Tokens: 16, Runs: 1, Layers: -1, Threads: 2, GateBeforeLoad: before}
			var late error
			traces, _, _, _ := vulkanRunThen(t, v, "", func(c *collector, p *testbench.Process) {
				if late = c.proc.Cmd.Process.Signal(syscall.SIGSTOP); late != nil {
					return
				}
				defer func() { late = errors.Join(late, c.proc.Cmd.Process.Signal(syscall.SIGCONT)) }()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				late = p.Wait(ctx)
			})
			if late != nil {
				t.Fatal(late)
			}
			splits := 0
			for _, s := range spans(traces) {
				if s.name == "ggml.backend.graph_compute" && s.attrs["ggml.backend"] == "VK" {
					splits++
				}
			}
			software := map[string]bool{}
			for _, td := range traces {
				for i := 0; i < td.ResourceSpans().Len(); i++ {
					if v, ok := td.ResourceSpans().At(i).Resource().Attributes().Get("ggml.device.software"); ok {
						software[v.AsString()] = true
					}
				}
			}
			t.Logf("%d Vulkan splits read after the job's exit; ggml.device.software %v", splits, software)
			if splits < 16 || !software["lavapipe"] || len(software) != 1 {
				t.Errorf("%d Vulkan splits for 16 tokens, ggml.device.software %v; want each token's and lavapipe", splits, software)
			}
		})
	}
}

// checkTimelineDevice checks that the view's timeline shows its decode's Vulkan splits
// beside the CPU's graph, and copies queued to them where copies says so.
func checkTimelineDevice(t *testing.T, p *summary.Process, copies bool) {
	t.Helper()
	tl := p.Timeline
	if tl == nil {
		t.Fatal("no timeline")
	}
	var splits, queued int
	for _, w := range tl.Device {
		if w.Backend != "VK" || w.Duration < 0 || w.Wait > w.Duration {
			t.Errorf("the timeline's device work %+v", w)
		}
		if w.Copy {
			queued++
		} else {
			splits++
		}
	}
	t.Logf("the timeline's graph of %d nodes: %d device splits, %d queued copies", len(tl.Nodes), splits, queued)
	if splits == 0 || copies && queued == 0 {
		t.Errorf("the timeline's device work: %d splits, %d queued copies: %+v", splits, queued, tl.Device)
	}
}

// One layer (the output) on the GPU: CPU and Vulkan splits, the activations queued to
// the device with their bytes, and a finding that the CPU computes most of the token.
func TestE2EVulkanPartialOffload(t *testing.T) {
	traces, _, p := vulkanRun(t, testbench.Vulkan{Model: "tiny-dense", Tokens: 24, Runs: 8, Layers: 1, Threads: 2}, fullTracing)
	splits := map[any]int{}
	var queued int64
	for _, s := range spans(traces) {
		switch s.name {
		case "ggml.backend.graph_compute":
			splits[s.attrs["ggml.backend"]]++
		case "ggml.backend.tensor_copy":
			n, _ := s.attrs["ggml.copy.bytes"].(int64)
			if s.attrs["ggml.copy.queued"] == true && s.attrs["ggml.backend.source"] == "CPU" && s.attrs["ggml.backend.destination"] == "VK" {
				queued += n
			}
		}
	}
	t.Logf("splits %v, %d bytes queued from CPU to VK; findings %v", splits, queued, findingIDs(p))
	if splits["CPU"] == 0 || splits["VK"] == 0 || queued == 0 {
		t.Errorf("splits %v, %d bytes queued from CPU to VK", splits, queued)
	}
	if len(deviceSpans(traces)) == 0 {
		t.Error("no device spans")
	}
	if !fired(p, "cpu-fallback") || fired(p, "device-unused") {
		t.Errorf("findings %v, want cpu-fallback", findingIDs(p))
	}
	checkDeviceFindings(t, p, "partial")
	checkTimelineDevice(t, p, true)
	checkLeadsWithDevice(t, p)
	// report.html: the traced token's device lanes render from the real run.
	br := testbench.RequireBrowser(t)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := page.WriteFile(path, &summary.View{Generated: time.Now(), Processes: []*summary.Process{p}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom, consoleErrors, err := br.DOMShot(ctx, "file://"+path, testbench.Shot{Path: "../build/gpu-view.png", Width: 1400, Height: 4200})
	if err != nil {
		t.Fatal(err)
	}
	if len(consoleErrors) > 0 || !strings.Contains(dom, "Vulkan in this decode: ") || !strings.Contains(dom, "queued to it (") {
		t.Errorf("report.html: console errors %q; the traced token's device work is not described", consoleErrors)
	}
	// trace.json: the device's work on its own track, the queued copies flowing into it,
	// and a document that passes the format checks.
	var doc bytes.Buffer
	w := perfetto.NewWriter(&doc)
	for _, td := range traces {
		if err := w.Traces(td); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := perfetto.Check(bytes.NewReader(doc.Bytes())); err != nil {
		t.Errorf("trace.json: %v", err)
	}
	if n, flows := bytes.Count(doc.Bytes(), []byte(`"cat":"device"`)), bytes.Count(doc.Bytes(), []byte(`"cat":"ggml.copy"`)); n == 0 || flows == 0 {
		t.Errorf("trace.json: %d device slices, %d queued-copy flow ends", n, flows)
	}
}

// The offload findings at their other settings, each on a run of its own. Without
// GGML_VK_VISIBLE_DEVICES, ggml-vulkan skips lavapipe, a CPU-type device, and the process
// runs on the CPU backend alone though it loaded the Vulkan one; with the device visible
// and no layer offloaded, the same: device-unused says so. With the MoE model's output
// layer alone offloaded, its two layers (their experts' MUL_MAT_ID) are left on the CPU:
// cpu-fallback names them (the dense model's are TestE2EVulkanPartialOffload's). Every
// layer offloaded beside a busy loop, as lavapipe's threads and ggml's share the cores
// with it: neither.
func TestE2EVulkanOffloadFindings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v      testbench.Vulkan
		beside bool
		want   string // the finding, or "" for none of the offload rules
	}{
		// Untraced, the tiny model runs some 500 tokens a second on this CPU: enough of
		// them that the collector attaches before they are done, however fast the host.
		{"no device visible", testbench.Vulkan{Model: "tiny-dense", Tokens: 64, Runs: 4, Layers: -1, Threads: 2, HideSoftware: true}, false, "device-unused"},
		{"no layer offloaded", testbench.Vulkan{Model: "tiny-dense", Tokens: 64, Runs: 4, Layers: 0, Threads: 2}, false, "device-unused"},
		{"the MoE's layers left", testbench.Vulkan{Model: "tiny-moe", Tokens: 24, Runs: 4, Layers: 1, Threads: 2}, false, "cpu-fallback"},
		{"every layer, beside a busy loop", testbench.Vulkan{Model: "tiny-dense", Tokens: 24, Runs: 4, Layers: -1, Threads: 2}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.beside {
				testbench.BusyLoop(t, -1)
			}
			traces, _, p := vulkanRun(t, tc.v, fullTracing)
			splits := map[any]int{}
			for _, s := range spans(traces) {
				if s.name == "ggml.backend.graph_compute" {
					splits[s.attrs["ggml.backend"]]++
				}
			}
			t.Logf("splits %v; loaded %v, findings %v", splits, p.Loaded, findingIDs(p))
			for _, ph := range p.Phases {
				if ph.DecodeSeconds > 0 {
					t.Logf("%s: copies between backends %.1f%% of llama_decode time", ph.Name, 100*ph.CopySeconds/ph.DecodeSeconds)
				}
			}
			for _, id := range []string{"device-unused", "cpu-fallback", "offload-copies"} {
				if fired(p, id) != (id == tc.want) {
					t.Errorf("findings %v; of the offload rules want %q alone", findingIDs(p), tc.want)
					break
				}
			}
			switch tc.want {
			case "device-unused":
				if splits["VK"] != 0 {
					t.Errorf("device-unused, and %d splits on Vulkan", splits["VK"])
				}
			case "cpu-fallback":
				checkDeviceFindings(t, p, "partial")
			case "":
				checkDeviceFindings(t, p, "full")
			}
		})
	}
}

// The default config: every split's device time, and in a sampling window the nodes of
// the device's split that follows the window's CPU graph (the embedding rows).
func TestE2EVulkanSampled(t *testing.T) {
	traces, _, p := vulkanRun(t, testbench.Vulkan{Model: "tiny-dense", Tokens: 24, Runs: 4, Layers: -1, Threads: 2}, "")
	devs := deviceSpans(traces)
	described := 0
	for _, d := range devs {
		nodes, _ := d.attrs["ggml.graph.nodes"].(int64)
		if len(d.events) > 0 {
			described++
			if int64(len(d.events)) != nodes {
				t.Errorf("device span of %d nodes described with %d", nodes, len(d.events))
			}
		}
	}
	t.Logf("%d device spans, %d described; backends %+v", len(devs), described, p.Backends)
	if len(devs) == 0 || described == 0 || described == len(devs) {
		t.Errorf("%d device spans, %d of them described: want every split's time, and the nodes of a window's", len(devs), described)
	}
}

// With ggml-vulkan's perf logger on, each device span sums the device's own times for its
// nodes, read at the logger's print, and its node events carry them where its nodes were
// read: every split at full tracing, a window's in the default config. Held out: the
// logger's own printed total for each graph, which the spans' sums must match one for
// one, in order.
func TestE2EVulkanPerfLogger(t *testing.T) {
	for _, tc := range []struct{ name, settings string }{{"all", fullTracing}, {"default", ""}} {
		t.Run(tc.name, func(t *testing.T) { perfLoggerRun(t, tc.settings, tc.settings == fullTracing) })
	}
}

func perfLoggerRun(t *testing.T, settings string, every bool) {
	traces, metrics, p, stderr := vulkanRunStderr(t, testbench.Vulkan{Model: "tiny-moe", Tokens: 24, Runs: 2, Layers: -1, Threads: 2, PerfLogger: true}, settings)
	var printed []float64 // µs, each graph's "Total time"
	for _, line := range strings.Split(string(stderr), "\n") {
		if v, ok := strings.CutPrefix(line, "Total time: "); ok {
			us, err := strconv.ParseFloat(strings.TrimSuffix(v, " us."), 64)
			if err != nil {
				t.Fatalf("logger line %q: %v", line, err)
			}
			printed = append(printed, us)
		}
	}
	devs := deviceSpans(traces)
	slices.SortFunc(devs, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var sums []float64 // µs, each device span's timed nodes
	var total float64  // s, all of them
	ops := map[string]float64{}
	experts, withEvents := 0, 0
	for _, d := range devs {
		timed, _ := d.attrs["ggml.graph.nodes.timed"].(int64)
		ns, _ := d.attrs["ggml.device.timed_ns"].(int64)
		if timed == 0 {
			if len(sums) > 0 { // not one of those before the probes attached
				t.Errorf("a device span without timed nodes: %v", d.attrs)
			}
			continue
		}
		if uint64(ns) > d.end-d.start {
			t.Errorf("the device timed %d ns of nodes in a span of %d ns", ns, d.end-d.start)
		}
		sums = append(sums, float64(ns)/1e3)
		total += float64(ns) / 1e9
		if len(d.eventAttrs) == 0 {
			continue
		}
		withEvents++
		var sum int64
		for _, ev := range d.eventAttrs {
			n, ok := ev["ggml.device.node_ns"].(int64)
			if !ok {
				t.Errorf("a node without its time: %v", ev)
				continue
			}
			sum += n
			ops[ev["ggml.op"].(string)] += float64(n) / 1e9
			label, _ := ev["ggml.device.label"].(string)
			if label == "" {
				t.Errorf("a timed node without its label: %v", ev)
			}
			if strings.Contains(label, "n_expert=") { // the logger's label of an experts' matmul
				experts++
			}
		}
		if sum != ns || int64(len(d.eventAttrs)) != timed {
			t.Errorf("%d nodes timed, %d ns; the events say %d nodes, %d ns", timed, ns, len(d.eventAttrs), sum)
		}
	}
	t.Logf("%d graphs printed, %d device spans timed, %d with their nodes; device op seconds %v", len(printed), len(sums), withEvents, ops)
	// The probes attach after the first Vulkan split: the spans are the prints' last ones.
	if len(sums) < len(printed)/2 || len(sums) > len(printed) {
		t.Fatalf("%d device spans timed for %d printed graphs", len(sums), len(printed))
	}
	tail := printed[len(printed)-len(sums):]
	for i := range sums {
		if math.Abs(sums[i]-tail[i]) > 1e-4*tail[i]+0.01 {
			t.Errorf("graph %d: the spans' nodes sum to %.3f µs, the logger printed %.3f µs", i, sums[i], tail[i])
		}
	}
	// In the default config a window may or may not fall on a device's split in a run
	// this short (TestE2EVulkanSampled checks that windows read them); most splits are
	// outside one.
	if every && withEvents != len(sums) || !every && withEvents > len(sums)/2 {
		t.Errorf("%d of %d timed device spans have their nodes as events", withEvents, len(sums))
	}
	if withEvents > 0 && (ops["MUL_MAT_ID"] == 0 || experts == 0) {
		t.Errorf("no time for the experts' MUL_MAT_ID (%d nodes labelled with n_expert): %v", experts, ops)
	}
	// ggml.backend.device.op.time sums every timed node by op (its last export): all the
	// spans' sums, and at full tracing each op's events.
	metric, metricTotal := map[string]float64{}, 0.0
	eachMetric(metrics, "ggml.backend.device.op.time", func(mm pmetric.Metric) {
		for i := 0; i < mm.Sum().DataPoints().Len(); i++ {
			dp := mm.Sum().DataPoints().At(i)
			op, _ := dp.Attributes().Get("ggml.op")
			metric[op.Str()] = dp.DoubleValue()
		}
	})
	for _, v := range metric {
		metricTotal += v
	}
	if metric["MUL_MAT_ID"] == 0 {
		t.Errorf("ggml.backend.device.op.time has no MUL_MAT_ID: %v", metric)
	}
	if math.Abs(metricTotal-total) > 1e-6+1e-3*total {
		t.Errorf("ggml.backend.device.op.time sums to %.6f s, the spans to %.6f s", metricTotal, total)
	}
	for op, want := range ops {
		if got := metric[op]; every && math.Abs(got-want) > 1e-6+1e-3*want {
			t.Errorf("ggml.backend.device.op.time{%s} %.6f s, the spans say %.6f s", op, got, want)
		}
	}
	for _, b := range p.Backends {
		if b.Backend == "VK" && withEvents > 0 && b.OpSeconds["MUL_MAT_ID"] == 0 {
			t.Errorf("the summary's VK backend has no MUL_MAT_ID time: %+v", b)
		}
	}
}

// Timing groups of nodes (GGML_VK_PERF_LOGGER_CONCURRENT), the logger files each group's
// time under the group's labels joined: no node is given a time it was not measured with.
func TestE2EVulkanPerfLoggerGroups(t *testing.T) {
	traces, _, _, stderr := vulkanRunStderr(t, testbench.Vulkan{Model: "tiny-dense", Tokens: 24, Runs: 2, Layers: -1, Threads: 2, PerfLogger: true, LoggerGroups: true}, fullTracing)
	if !bytes.Contains(stderr, []byte("Total time: ")) {
		t.Fatalf("the logger printed nothing: %s", stderr)
	}
	devs := deviceSpans(traces)
	for _, d := range devs {
		if _, ok := d.attrs["ggml.graph.nodes.timed"]; ok {
			t.Fatalf("a device span with timed nodes, the logger timing groups: %v", d.attrs)
		}
	}
	if len(devs) == 0 {
		t.Fatal("no device spans")
	}
}
