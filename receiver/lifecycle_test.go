//go:build e2e

package receiver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
	re := regexp.MustCompile(`(?m)^(\S+)\s+(?:info|warn)\s+\S+\s+` + regexp.QuoteMeta(msg) + `\s+\{.*"pid": ` + strconv.Itoa(pid) + `[,}]`)
	m := re.FindStringSubmatch(c.proc.Stderr.String())
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1])
	return at, err == nil
}

// attachedWith says whether the collector's "attached" line for pid has field, as it
// prints it.
func attachedWith(c *collector, pid int, field string) bool {
	re := regexp.MustCompile(`(?m)\sattached\s+\{.*"pid": ` + strconv.Itoa(pid) + `[,}].*` + regexp.QuoteMeta(field))
	return re.MatchString(c.proc.Stderr.String())
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

// openGate lets a driver that waits for file gate go on (WAIT_FILE), once the collector
// has attached its process pid: it then sees the workload from its first decode.
func openGate(t *testing.T, c *collector, pid int, gate string) {
	t.Helper()
	waitLogged(t, c, "attached", pid, time.Now(), 60*time.Second)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
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
	// What is timed is the collector, not a cold disk: on a fresh machine the server's
	// first exec read its libraries in for a second and more.
	if _, err := testbench.Run(ctx, e.Bin("llama-server"), "--version"); err != nil {
		t.Fatal(err)
	}
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
		// The test bench's build links RPC's backend; a server that names no RPC server
		// computes on the CPU alone and needs no split probes.
		if !attachedWith(c, s.PID(), `"split_probes": false`) {
			t.Errorf("round %d: pid %d attached with split probes, though it loaded no backend but RPC's:\n%s", round, s.PID(), c.proc.Stderr.String())
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
	checkTimerSlack(t, c.proc.PID())
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
	dir := copyBuild(t, e)
	exe := filepath.Join(dir, "llama-bench")
	bench := startBenchIn(t, dir, e.BenchArgs("llama-1b-q4_0", 16, 16, 2, 8)...)
	defer bench.Stop()
	replaced := []string{"llama-bench", "libggml-base.so.0.25.1", "libggml-cpu.so", "libllama.so.0.5.0"}
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

// copyBuild copies the test bench's llama.cpp binaries and libraries to a new directory,
// and returns it.
func copyBuild(t *testing.T, e *testbench.Env) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Dir(e.Bin("llama-bench"))+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the build: %v: %s", err, out)
	}
	return dir
}

// startBenchIn starts the llama-bench of a copied build with its own libraries: the
// build's RUNPATH names the original directory, which LD_LIBRARY_PATH overrides.
func startBenchIn(t *testing.T, dir string, args ...string) *testbench.Process {
	t.Helper()
	p, err := testbench.Start("env", append([]string{"LD_LIBRARY_PATH=" + dir, filepath.Join(dir, "llama-bench")}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// A llama-bench in a container of its own making (new mount and PID namespaces, made with
// unshare) runs binaries and a model from paths that exist only in its mount namespace.
// It is found and profiled from outside: its files are reached through /proc/PID/root,
// and its resource has the PID as the host sees it, and as process.vpid its own (1).
func TestE2EContainer(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testbench.Missing(t, "unshare (util-linux)")
	}
	c := startCollectorOf(t, ctx, nil, fullTracing) // no targets: discover every GGML process
	root := t.TempDir()                             // empty on the host; the container mounts over it
	model := filepath.Join(root, "models", "llama-1b-q4_0.gguf")
	script := `set -e
mount -t tmpfs tmpfs "$1"
mkdir "$1/bin" "$1/models"
mount --bind "$2" "$1/bin"
mount --bind "$3" "$1/models"
cd "$1"
shift 3
LD_LIBRARY_PATH="$PWD/bin" exec "$PWD/bin/llama-bench" "$@"`
	bin, _ := filepath.EvalSymlinks(filepath.Dir(e.Bin("llama-bench")))
	args := append([]string{"--mount", "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh",
		root, bin, filepath.Dir(e.Model("llama-1b-q4_0"))}, e.BenchArgs("llama-1b-q4_0", 16, 16, 2, 3)...)
	args[slices.Index(args, e.Model("llama-1b-q4_0"))] = model
	box, err := testbench.Start(unshare, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer box.Stop()
	// unshare forks the shell, which becomes llama-bench: the target is its child.
	var child int
	for child == 0 && !box.Exited() {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", box.PID(), box.PID()))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(time.Millisecond)
	}
	if err := box.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "llama-bench")); !os.IsNotExist(err) {
		t.Fatalf("the container's files are visible on the host (%v): the test would prove nothing", err)
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)
	checkProfile(t, traces, metrics, 16)
	var res []map[string]any
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			res = append(res, td.ResourceSpans().At(i).Resource().Attributes().AsRaw())
		}
	}
	models := 0
	for _, r := range res {
		if r["process.pid"] != int64(child) || r["process.vpid"] != int64(1) {
			t.Fatalf("resource process.pid %v, process.vpid %v: want %d, as the host sees it, and 1", r["process.pid"], r["process.vpid"], child)
		}
		if r["process.executable.path"] != filepath.Join(root, "bin", "llama-bench") {
			t.Fatalf("resource process.executable.path %v: want the path inside the container", r["process.executable.path"])
		}
		if m, ok := r["llama.model.path"]; ok {
			models++
			if m != model {
				t.Fatalf("resource llama.model.path %v: want the path inside the container, %s", m, model)
			}
		}
	}
	if models != len(res) {
		t.Errorf("%d of %d resources name the model: it was not found through the container's root", models, len(res))
	}
}

// A GGML process that loads libllama with dlopen after profinfer attached to it (as a
// binding may): testdata/lateload.c links GGML's CPU backend, waits until the test has
// seen it attached, then dlopens libllama, and once the test has seen the probes added,
// decodes eight tokens. The probes on libllama are added on the loader's notice, so the
// decodes are traced, with the graphs inside them.
func TestE2ELateLoad(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cc, err := exec.LookPath("cc")
	if err != nil {
		testbench.Missing(t, "a C compiler (cc)")
	}
	dir := t.TempDir()
	bin := filepath.Dir(e.Bin("llama-bench"))
	src := filepath.Join(e.Root, "llama.cpp", "src")
	exe := filepath.Join(dir, "lateload")
	if out, err := exec.Command(cc, "-O1", "-o", exe, "testdata/lateload.c",
		"-I", filepath.Join(src, "include"), "-I", filepath.Join(src, "ggml", "include"),
		"-L", bin, "-lggml-cpu", "-lggml", "-lggml-base", "-ldl", "-Wl,-rpath,"+bin).CombinedOutput(); err != nil {
		t.Fatalf("compiling lateload: %v: %s", err, out)
	}
	c := startCollector(t, ctx, exe, fullTracing)
	started := time.Now()
	p, err := testbench.Start(exe, filepath.Join(bin, "libllama.so"), e.Model("tiny-dense"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	waitLogged(t, c, "attached", p.PID(), started, 10*time.Second)
	if maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.PID())); bytes.Contains(maps, []byte("libllama")) {
		t.Fatal("lateload mapped libllama before it was told to: the test would prove nothing")
	}
	loaded := time.Now()
	if err := os.WriteFile(filepath.Join(dir, "load"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, c, "probes added on code loaded since attach", p.PID(), loaded, 10*time.Second)
	if err := os.WriteFile(filepath.Join(dir, "decode"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, _ := c.stop(t)
	decodes, graphs := 0, 0
	all := spans(traces)
	byID := spansByID(all)
	for _, s := range all {
		switch s.name {
		case "llama_decode":
			decodes++
		case "ggml.graph_compute":
			for up := byID[s.parent]; up.id != ""; up = byID[up.parent] {
				if up.name == "llama_decode" {
					graphs++
					break
				}
			}
		}
	}
	// Each single-token decode computes one graph; the warm-up decode llama.cpp runs when
	// it makes the context may come too.
	t.Logf("%d llama_decode spans, %d graphs inside them", decodes, graphs)
	if decodes < 8 || graphs < 8 {
		t.Errorf("%d llama_decode spans with %d graphs inside, want the 8 decodes lateload made, each with its graph", decodes, graphs)
	}
}

// Processes that map and unmap GGML while profinfer attaches to them (testdata/churn.c:
// 60 short-lived children each dlopen node-llama-cpp 3.1.1's libggml.so, whose dlclose
// unmaps it, dlclose it 10 to 175 ms later and exit) are unharmed, and so is
// profinfer: nothing panics, a process seen gone mid-attach is not called refused (it was
// counted as unsupported_layout or probes, with errors naming no cause), and once the
// parent keeps the library, the graphs it computes are traced node by node.
func TestE2EUnmappedMidAttach(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cc, err := exec.LookPath("cc")
	if err != nil {
		testbench.Missing(t, "a C compiler (cc)")
	}
	lib := filepath.Join(e.OldPrebuiltDir("3.1.1"), "libggml.so")
	if _, err := os.Stat(lib); err != nil {
		testbench.Missing(t, err.Error())
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "churn")
	if out, err := exec.Command(cc, "-O1", "-o", exe, "testdata/churn.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("compiling churn: %v: %s", err, out)
	}
	out := filepath.Join(dir, "out.jsonl")
	col := runCollector(t, ctx, fmt.Sprintf(`
receivers:
  profinfer: {targets: [{executable: %q}], discovery_interval: 1h, %s}
exporters:
  file: {path: %q}
service:
  telemetry: {logs: {level: debug}, metrics: {level: none}}
  pipelines:
    traces: {receivers: [profinfer], exporters: [file]}
`, exe, fullTracing, out))
	c := &collector{proc: col, out: out}
	p, err := testbench.Start(exe, lib, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	for _, err := os.Stat(filepath.Join(dir, "steady")); err != nil; _, err = os.Stat(filepath.Join(dir, "steady")) {
		if ctx.Err() != nil || p.Exited() {
			t.Fatalf("churn never reached its steady phase: %s", p.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	steady := uint64(time.Now().UnixNano())
	time.Sleep(4 * time.Second)
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("churn: %v\n%s", err, p.Stderr.String())
	}
	traces, _ := c.stop(t)
	log := col.Stderr.String()
	if strings.Contains(log, "panic") {
		t.Fatalf("the collector panicked:\n%s", log)
	}
	attempts, vanished := 0, 0
	for _, l := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(l, "GGML process not profiled"):
			t.Errorf("refused, though it only came and went: %s", l)
		case strings.Contains(l, "exited or unmapped GGML"):
			vanished++
			fallthrough
		case strings.Contains(l, "\tattached\t"), strings.Contains(l, "process not attached"):
			attempts++
		}
	}
	children := map[string]int{}
	all := spans(traces)
	for _, s := range all {
		children[s.parent]++
	}
	graphs := 0
	for _, s := range all {
		if s.pid == int64(p.PID()) && s.name == "ggml.graph_compute" && s.start > steady && children[s.id] >= 2 {
			graphs++
		}
	}
	t.Logf("%d attach attempts, %d of them on a process gone mid-attach; %d graphs traced in the steady phase", attempts, vanished, graphs)
	if attempts < 10 || vanished == 0 {
		t.Fatalf("%d attach attempts, %d on a process gone mid-attach: the children came and went unseen, the test proved little\n%s", attempts, vanished, log)
	}
	if graphs < 5 {
		t.Errorf("%d graphs traced with their nodes once the library stayed, want the 15 or so churn computed", graphs)
	}
}
