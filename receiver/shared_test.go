//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// The answer on a shared machine, with the default config: llama-bench with two threads
// alone, beside two CPU hogs, and in cgroups whose quotas are one CPU and one and a half.
// Alone, its threads have their CPUs and neither the contention nor the quota finding
// fires. Beside the hogs, the graphs say the threads lacked the CPU, the ops are starved
// rather than overhead-bound, and the contention finding fires in place of advice on
// kernels. Under a quota, the quota finding names the quota, the threads, the throttling
// and the threads it supports (-t 1). The report's text, report.html and the live page
// say the same.
func TestE2ESharedMachine(t *testing.T) {
	env := testbench.Require(t)
	br := testbench.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bench := env.Bin("llama-bench")
	out := filepath.Join(dir, "out.jsonl")
	port := freePort(t)
	// The default config, but for windows every quarter second rather than 10 s: a short run
	// is sampled several times, as a server is over minutes. The first window opens as the
	// collector attaches, when its own work may hold the model's threads up.
	runCollector(t, ctx, viewConfig("profinfer",
		fmt.Sprintf("{targets: [{executable: %q}], discovery_interval: 1h, collection_interval: 1s, nodes: {sample_interval: 250ms}}", bench), out, port))
	// Under the quota, some 2 s at 30 tokens a second: several windows, however fast the host.
	args := env.BenchArgs("llama-1b-q4_0", 0, 64, 2, 1)
	run := func(name string, args []string) int {
		p, err := testbench.Start(name, args...)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, p.Stderr.String())
		}
		return p.PID()
	}
	// Some 2 s at 60 tokens a second, 6 s at 20: two windows or more, however fast the host.
	alone := run(bench, env.BenchArgs("llama-1b-q4_0", 0, 128, 2, 1))
	var hogs []*testbench.Process
	for range 2 { // one per core
		hogs = append(hogs, testbench.BusyLoop(t, -1))
	}
	contended := run(bench, env.BenchArgs("llama-1b-q4_0", 0, 12, 2, 1)) // 0.6 to 20 tokens a second
	for _, h := range hogs {
		h.Stop()
	}
	quota := run(testbench.CPUQuota(t, 1).Command(bench, args...))
	quota15 := run(testbench.CPUQuota(t, 1.5).Command(bench, args...)) // a share of 0.75 at most
	settle(t, ctx, out)

	v := summarize(t, out)
	advise.Annotate(v)
	check := func(pid int, name string, minShare, maxShare float64, want, not []string) {
		p := byPID(t, v, pid)
		fired := map[string]string{}
		for _, f := range p.Findings {
			fired[f.ID] = strings.Join(f.Evidence, "; ")
			// Where the test wants it, the contention held throughout the run; a 1.5-CPU
			// quota's cost 3-5% of the graphs' time, said as information.
			if f.ID == "threads-contended" && slices.Contains(want, f.ID) && f.Severity != "warning" {
				t.Errorf("%s: contention throughout the run said as %s: %s", name, f.Severity, fired[f.ID])
			}
		}
		var decode *summary.Phase
		for _, ph := range p.Phases {
			if ph.Name == "decode" {
				decode = ph
			}
		}
		if decode == nil || decode.CPU == nil || decode.CPU.Graphs < 2 {
			t.Fatalf("%s: no decode phase with its threads' CPU share over its tokens: %+v", name, decode)
		}
		c := decode.CPU
		t.Logf("%s: threads on a CPU %.0f%% of %d graphs, waiting for one %.0f%%; %.1f tokens/s; findings %v",
			name, 100*c.Share, c.Graphs, 100*c.Wait/c.ThreadSeconds, decode.TokensPerSec, fired)
		if c.Share < minShare || c.Share > maxShare {
			t.Errorf("%s: threads on a CPU %.2f of graph time, want %.2f to %.2f", name, c.Share, minShare, maxShare)
		}
		for _, id := range want {
			if fired[id] == "" {
				t.Errorf("%s: %s did not fire", name, id)
			}
		}
		for _, id := range not {
			if fired[id] != "" {
				t.Errorf("%s: %s fired: %s", name, id, fired[id])
			}
		}
		// One verdict: starved, the phase's ops are all judged so; alone, none is.
		starved := 0
		for _, o := range decode.Ops {
			if o.Bound == "starved" {
				starved++
			}
		}
		if want := maxShare < roofline.StarvedBelow; c.Starved != want || want && starved < len(decode.Ops) || !want && starved > 0 {
			t.Errorf("%s: phase starved %v, %d of %d ops judged starved; want the phase starved %v, and its ops with it", name, c.Starved, starved, len(decode.Ops), want)
		}
		if len(decode.Ops) == 0 {
			t.Errorf("%s: no decode graph was traced", name)
		}
	}
	check(alone, "alone", 0.9, 1, nil, []string{"threads-contended", "threads-queued", "threads-blocked", "cpu-quota"})
	check(contended, "beside two hogs", 0.3, 0.7, []string{"threads-contended"}, []string{"overhead-bound", "cpu-quota", "cold-start"})
	check(quota, "under a 1-CPU quota", 0.3, 0.7, []string{"threads-contended", "cpu-quota"}, []string{"overhead-bound"})
	check(quota15, "under a 1.5-CPU quota", 0.5, 0.79, []string{"cpu-quota"}, []string{"overhead-bound"})
	for pid, cpus := range map[int]float64{quota: 1, quota15: 1.5} {
		q := byPID(t, v, pid).Quota
		if q == nil || q.CPUs != cpus || q.Threads != 2 || q.Throttled == 0 || q.ThrottledSeconds <= 0 {
			t.Errorf("under a %g-CPU quota: %+v, want %g CPUs, 2 threads and some throttling", cpus, q, cpus)
		}
		for _, f := range byPID(t, v, pid).Findings {
			if f.ID == "cpu-quota" && (!strings.Contains(f.Title, fmt.Sprintf("%g CPUs", cpus)) || !strings.Contains(f.Advice, "-t 1")) {
				t.Errorf("under a %g-CPU quota: %q, %q; want the quota named, and -t 1", cpus, f.Title, f.Advice)
			}
		}
	}
	if byPID(t, v, alone).Quota != nil || byPID(t, v, contended).Quota != nil {
		t.Errorf("a quota on a process outside any: %+v, %+v", byPID(t, v, alone).Quota, byPID(t, v, contended).Quota)
	}

	// The report's text, per process.
	reportDir := filepath.Join(dir, "report")
	text, err := exec.CommandContext(ctx, "go", "run", "../cmd/profinfer", "report", "-o", reportDir, out).Output()
	if err != nil {
		t.Fatalf("profinfer report: %v\n%s", err, text)
	}
	section := func(pid int) string {
		s := string(text)
		i := strings.Index(s, fmt.Sprintf("(pid %d)", pid))
		if i < 0 {
			t.Fatalf("the report has no process %d:\n%s", pid, s)
		}
		s = s[i:]
		if j := regexp.MustCompile(`\(pid \d+\)`).FindAllStringIndex(s, 2); len(j) > 1 {
			s = s[:j[1][0]]
		}
		return s
	}
	for _, tc := range []struct {
		pid       int
		want, not []string
	}{
		{alone, []string{"threads on a CPU"}, []string{"starved", "CPU quota:", "lacked the CPU"}},
		{contended, []string{"(starved, waiting for a CPU: ops are judged by that, not by their wall time)", "The model's threads lacked the CPU"}, []string{"Ops far below their roof", "CPU quota:"}},
		{quota, []string{"CPU quota: 1.00 CPUs (cgroup /profinfer-test-", "for 2 threads; throttled in", "A CPU quota of 1 CPUs holds the model back", "supports -t 1"}, nil},
	} {
		s := section(tc.pid)
		for _, w := range tc.want {
			if !strings.Contains(s, w) {
				t.Errorf("the report on process %d lacks %q:\n%s", tc.pid, w, s)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(s, n) {
				t.Errorf("the report on process %d says %q:\n%s", tc.pid, n, s)
			}
		}
	}

	// The live page and report.html, opened on each process by a link.
	for _, url := range []string{fmt.Sprintf("http://127.0.0.1:%d/", port), "file://" + filepath.Join(reportDir, "report.html")} {
		for _, tc := range []struct {
			pid              int
			starved, limited bool
		}{{alone, false, false}, {contended, true, false}, {quota, true, true}} {
			page := fmt.Sprintf("%s#pid=%d", url, tc.pid)
			dom, consoleErrors, err := br.DOM(ctx, page)
			if err != nil || len(consoleErrors) > 0 {
				t.Fatalf("%s: %v %q", page, err, consoleErrors)
			}
			doc, err := html.Parse(strings.NewReader(dom))
			if err != nil {
				t.Fatal(err)
			}
			var onCPU, starvedTile, quotaTile, contention, overhead bool
			testbench.Walk(doc, func(n *html.Node) {
				for _, a := range n.Attr {
					switch {
					case a.Key == "data-oncpu" && a.Val == "decode":
						onCPU = true
						starvedTile = strings.Contains(attr(n, "class"), "starved")
					case a.Key == "data-quota":
						quotaTile = true
					case a.Key == "data-rule" && a.Val == "threads-contended":
						contention = true
					case a.Key == "data-rule" && a.Val == "overhead-bound":
						overhead = true
					}
				}
			})
			if !onCPU || starvedTile != tc.starved || contention != tc.starved || tc.starved && overhead || quotaTile != tc.limited {
				t.Errorf("%s: on-CPU tile %v (starved %v), quota tile %v, contention finding %v, overhead finding %v; want starved %v, quota %v",
					page, onCPU, starvedTile, quotaTile, contention, overhead, tc.starved, tc.limited)
			}
		}
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// node-llama-cpp computing the tiny model with 2 threads on 2 CPUs, under the default
// config. Each graph makes ggml's second thread anew, on the CPU of the thread that makes
// it; where the scheduler leaves them there, the two spin at each barrier by turns of a
// tick while the other CPU idles (perf sched on these VMs: 4 ms turns, some 15 ms a token
// against 0.8 with one thread). Its threads wait for a CPU a quarter of their graphs' time
// though no other process takes one: threads-queued names that, threads-contended does
// not. Beside a busy loop the waits are the loop's: threads-contended names them,
// threads-queued does not. Where threads-queued fires, its advice is checked: one thread
// computes the same tokens faster. Whether the scheduler leaves the threads together is
// the host's: where no phase is starved, neither rule may fire.
func TestE2EThreadsQueued(t *testing.T) {
	env := testbench.Require(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, node, "")
	run := func(threads, repeat int, hog bool) testbench.NodeResult {
		if hog {
			defer testbench.BusyLoop(t, 1).Stop()
		}
		out, err := testbench.Run(ctx, node, env.NodeArgs("tiny-dense", 100, threads, repeat)...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := testbench.ParseNode(out)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Alone second: the first run shares the CPUs with the collector's start.
	beside := run(2, 2, true)
	alone, one := run(2, 4, false), run(1, 4, false)
	settle(t, ctx, c.out)
	v := summarize(t, c.out)
	advise.Annotate(v)
	check := func(r testbench.NodeResult, name, want, not string) (starved bool) {
		p := byPID(t, v, r.PID)
		fired := map[string]string{}
		for _, f := range p.Findings {
			fired[f.ID] = f.Title + ": " + strings.Join(f.Evidence, "; ")
		}
		for _, ph := range p.Phases {
			if ph.CPU != nil && ph.CPU.Judged {
				cpu := ph.CPU
				t.Logf("%s: %s: threads on a CPU %.0f%% of %d graphs, waiting for one %.0f%%, starved %v (%s)",
					name, ph.Name, 100*cpu.Share, cpu.Graphs, 100*cpu.Wait/max(cpu.ThreadSeconds, 1e-12), cpu.Starved, cpu.Lacked)
				starved = starved || cpu.Starved && cpu.Lacked == summary.LackedCPU
			}
		}
		if cs := p.CPUs; cs != nil {
			t.Logf("%s: %.0f tokens/s; CPUs idle %.2f, others %.2f (measured %v) of %d; findings %v",
				name, float64(r.Tokens)/r.Seconds, cs.Idle, cs.Others, cs.OthersMeasured, cs.Allowed, fired)
			if !cs.OthersMeasured {
				t.Errorf("%s: what other processes took of the CPUs was not measured", name)
			}
		}
		if starved && fired[want] == "" {
			t.Errorf("%s: starved for a CPU, and %s did not fire", name, want)
		}
		if fired[not] != "" {
			t.Errorf("%s: %s", name, fired[not])
		}
		if !starved && fired[want] != "" {
			t.Errorf("%s: no phase starved for a CPU, and %s fired", name, fired[want])
		}
		return starved
	}
	if check(alone, "2 threads alone", "threads-queued", "threads-contended") {
		aloneRate, oneRate := float64(alone.Tokens)/alone.Seconds, float64(one.Tokens)/one.Seconds
		t.Logf("1 thread: %.0f tokens/s", oneRate)
		if oneRate <= aloneRate {
			t.Errorf("threads-queued's advice: 1 thread %.0f tokens/s, no faster than 2 threads' %.0f", oneRate, aloneRate)
		}
	}
	check(beside, "2 threads beside a busy loop", "threads-contended", "threads-queued")
}

// llama-bench computing the tiny model with 2 threads on an otherwise idle machine,
// under the default config with windows every quarter second: some 24 000 decode graphs
// of a quarter millisecond, each far shorter than the scheduler tick at which the kernel
// counts a running thread's CPU time. The graphs walked caught a tick's time or none, and
// read the threads on their CPUs under half the time, blocked: a wrong verdict and a
// wrong finding. The phase is not judged, and says why; no finding speaks of the threads.
func TestE2EShortGraphs(t *testing.T) {
	env := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bench := env.Bin("llama-bench")
	c := startCollector(t, ctx, bench, "nodes: {sample_interval: 250ms}")
	if _, err := testbench.Run(ctx, bench, env.BenchArgs("tiny-dense", 0, 1024, 2, 24)...); err != nil {
		t.Fatal(err)
	}
	settle(t, ctx, c.out)
	v := summarize(t, c.out)
	advise.Annotate(v)
	if len(v.Processes) != 1 {
		t.Fatalf("%d processes, want llama-bench's", len(v.Processes))
	}
	p := v.Processes[0]
	dec := phaseNamed(t, p, "decode")
	cpu := dec.CPU
	if cpu == nil {
		t.Fatal("decode: no threads' CPU figures")
	}
	t.Logf("decode: %d graphs walked, %.3f ms each, %.0f ms of thread time, on a CPU %.0f%%; %s",
		cpu.Graphs, 1e3*cpu.Wall/max(float64(cpu.Graphs), 1), 1e3*cpu.ThreadSeconds, 100*cpu.Share, cpu.Thin)
	if cpu.ThreadSeconds < roofline.MinThreadSeconds {
		t.Errorf("decode: %.0f ms of thread time walked, under the %.0f ms a verdict needs: the test proves nothing", 1e3*cpu.ThreadSeconds, 1e3*roofline.MinThreadSeconds)
	}
	if cpu.Judged || cpu.Starved || !strings.Contains(cpu.Thin, "scheduler tick") {
		t.Errorf("decode: judged %v, starved %v (%q); want not judged, for the tick", cpu.Judged, cpu.Starved, cpu.Thin)
	}
	for _, f := range p.Findings {
		if strings.HasPrefix(f.ID, "threads-") {
			t.Errorf("%s: %s: %s", f.ID, f.Title, strings.Join(f.Evidence, "; "))
		}
	}
	for _, o := range dec.Ops {
		if o.Bound == summary.BoundStarved || o.Bound == summary.BoundBlocked || o.Bound == summary.BoundDisk {
			t.Errorf("decode: %s %s judged %s: %s", o.Op, o.Weight, o.Bound, o.Why)
		}
	}
}

// A deep, narrow model (128 layers of 128 wide: some 2 000 nodes of microseconds a
// token) under llama-bench with 2 threads and with 1, under the default config with
// windows every quarter second: its ops run far below their roofs in short calls, their
// time the nodes' dispatch and barriers, and overhead-bound says so at both. With one
// thread, threads-few does not advise a second: more threads lengthen such ops. Both
// are checked against the runs themselves: one thread decodes faster than two. The
// 1B model beside them, whose ops are not overhead-bound, gets no such finding.
func TestE2EOverheadBound(t *testing.T) {
	env := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bench := env.Bin("llama-bench")
	c := startCollector(t, ctx, bench, "nodes: {sample_interval: 250ms}")
	run := func(model string, tokens, threads, reps int) (int, float64) {
		p, err := testbench.Start(bench, env.BenchArgs(model, 0, tokens, threads, reps)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("%s -t %d: %v\n%s", model, threads, err, p.Stderr.String())
		}
		rs, err := testbench.ParseBench(p.Stdout.Bytes())
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s -t %d: %v %+v", model, threads, err, rs)
		}
		return p.PID(), rs[0].AvgTS
	}
	two, twoRate := run("deep-narrow", 128, 2, 1)
	// One thread decodes up to 3 times as fast: three runs of 128 tokens give its windows
	// the same time, and its phase the 100 ms of thread time a verdict needs (one gave
	// 84 ms with AVX2's kernels), at the same depth (at 384 tokens its attention made one
	// thread no faster than two with AVX-512's).
	one, oneRate := run("deep-narrow", 128, 1, 3)
	healthy, _ := run("llama-1b-q4_0", 32, 2, 1)
	settle(t, ctx, c.out)
	v := summarize(t, c.out)
	advise.Annotate(v)
	t.Logf("deep-narrow: %.0f tokens/s with 2 threads, %.0f with 1", twoRate, oneRate)
	if oneRate <= twoRate {
		t.Errorf("deep-narrow: 1 thread %.0f tokens/s, no faster than 2 threads' %.0f: the overhead's advice does not hold here", oneRate, twoRate)
	}
	for _, tc := range []struct {
		pid       int
		name      string
		want, not []string
	}{
		{two, "deep-narrow, 2 threads", []string{"overhead-bound"}, []string{"threads-few", "threads-contended", "threads-queued", "threads-blocked"}},
		{one, "deep-narrow, 1 thread", []string{"overhead-bound"}, []string{"threads-few", "threads-contended", "threads-queued", "threads-blocked"}},
		{healthy, "llama-1b, 2 threads", nil, []string{"overhead-bound"}},
	} {
		p := byPID(t, v, tc.pid)
		fired := map[string]string{}
		for _, f := range p.Findings {
			fired[f.ID] = f.Title + ": " + strings.Join(f.Evidence, "; ")
		}
		if dec := phaseNamed(t, p, "decode"); dec.CPU != nil {
			t.Logf("%s: decode's threads on a CPU %.0f%% of %d graphs (%s); findings %v", tc.name, 100*dec.CPU.Share, dec.CPU.Graphs, dec.CPU.Thin, fired)
		}
		for _, id := range tc.want {
			if fired[id] == "" {
				t.Errorf("%s: no %s", tc.name, id)
			}
		}
		for _, id := range tc.not {
			if fired[id] != "" {
				t.Errorf("%s: %s", tc.name, fired[id])
			}
		}
	}
}
