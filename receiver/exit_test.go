//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/testbench"
)

// oomLimit is a memory limit llama-bench on the 1B Q4_0 model loads under (its weights,
// repacked at load into anonymous memory, take some 545 MiB) and runs a 16-token prefill
// under, but not a 1024-token one: its context's KV cache and compute buffer take it to
// some 635 MiB, and anonymous memory cannot be reclaimed as the mapped file's pages can.
const oomLimit = 600 << 20

// A process's end, said: llama-bench killed by its memory cgroup's OOM killer is named so,
// with the cgroup's limit and usage, in the spans and in the report; one killed by SIGTERM
// while it decodes is named by its signal, with the decodes it completed and the one it
// was cut short in.
func TestE2EProcessEnd(t *testing.T) {
	env := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bench := env.Bin("llama-bench")
	c := startCollector(t, ctx, bench, "")

	cg := testbench.MemoryLimit(t, oomLimit)
	// Some seconds of pp16, long enough to be attached whatever the machine's load, then
	// pp1024's warm-up, killed.
	name, args := cg.Command(bench, "-m", env.Model("llama-1b-q4_0"), "-p", "16,1024", "-n", "0", "-t", "2", "-r", "5", "-o", "json")
	oom, err := testbench.Start(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := oom.Wait(ctx); err == nil || signalOf(oom) != syscall.SIGKILL {
		t.Fatalf("llama-bench under a %d MiB limit was not killed (%v); stderr:\n%s", oomLimit>>20, err, oom.Stderr.String())
	}

	// Some seconds of decoding, killed once a decode or more is out (the slowest machine
	// here computed one in its first 3 s), inside the next.
	term, err := testbench.Start(bench, env.BenchArgs("llama-1b-q4_0", 0, 4096, 2, 1)...)
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(c.proc.Stderr.String(), fmt.Sprintf(`"pid": %d`, term.PID())) {
		if ctx.Err() != nil || term.Exited() {
			t.Fatalf("llama-bench %d was not attached:\n%s", term.PID(), c.proc.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(4 * time.Second)
	if err := term.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = term.Wait(ctx)
	if signalOf(term) != syscall.SIGTERM {
		t.Fatalf("llama-bench did not die of SIGTERM: %v", term.Cmd.ProcessState)
	}
	time.Sleep(1500 * time.Millisecond) // a collection interval: the ends are exported
	traces, _ := c.stop(t)

	ends := map[int64]span{}
	cut := map[int64]int{}
	for _, s := range spans(traces) {
		switch {
		case s.name == schema.SpanProcess:
			ends[s.pid] = s
		case s.attrs[schema.ProfinferCut] == true:
			cut[s.pid]++
		}
	}
	end := func(pid int) map[string]any {
		s, ok := ends[int64(pid)]
		if !ok || len(s.events) != 1 || s.events[0] != schema.EventProcessExit {
			t.Fatalf("no %s span with its %s event for pid %d: %+v", schema.SpanProcess, schema.EventProcessExit, pid, s)
		}
		t.Logf("pid %d: %v", pid, s.eventAttrs[0])
		return s.eventAttrs[0]
	}
	e := end(oom.PID())
	cgroup := "/" + filepath.Base(cg.Dir)
	if e[schema.ProfinferExitSignal] != "SIGKILL" || e[schema.ProfinferExitOOMKiller] != "cgroup" || e[schema.ProfinferExitCgroup] != cgroup ||
		e[schema.ProfinferExitMemoryLimit] != int64(oomLimit) || e[schema.ProfinferExitMemoryPeak] == nil ||
		e[schema.ProfinferExitMemoryPeak].(int64) < oomLimit*9/10 || e[schema.ProfinferExitSteps].(int64) < 1 {
		t.Errorf("the OOM kill: %v; want SIGKILL by the cgroup OOM killer of %s, limit %d, peak near it, pp16's decodes", e, cgroup, oomLimit)
	}
	e = end(term.PID())
	if e[schema.ProfinferExitSignal] != "SIGTERM" || e[schema.ProfinferExitOOMKiller] != nil || e[schema.ProcessExitCode] != nil ||
		e[schema.ProfinferExitSteps].(int64) < 1 || e[schema.ProfinferExitGraphs].(int64) <= e[schema.ProfinferExitSteps].(int64) {
		t.Errorf("the SIGTERM: %v; want SIGTERM, no OOM killer, some decodes and their graphs", e)
	}
	if cut[int64(term.PID())] == 0 {
		t.Errorf("no span of the decode llama-bench was killed in is marked %s", schema.ProfinferCut)
	}

	// The OOM kill is a finding, with its limit; the SIGTERM none.
	v := summarize(t, c.out)
	advise.Annotate(v)
	if f := finding(byPID(t, v, oom.PID()), "oom-killed"); f == nil || !strings.Contains(f.Title, cgroup) ||
		!strings.Contains(strings.Join(f.Evidence, "\n"), fmt.Sprintf("limit is %.1f MB", float64(oomLimit)/1e6)) {
		t.Errorf("the OOM kill: no finding naming cgroup %s and its limit: %v", cgroup, byPID(t, v, oom.PID()).Findings)
	}
	if f := finding(byPID(t, v, term.PID()), "oom-killed"); f != nil {
		t.Errorf("the SIGTERM: %s", f.Title)
	}

	text, err := exec.CommandContext(ctx, "go", "run", "../cmd/profinfer", "report", "-o", t.TempDir(), c.out).Output()
	if err != nil {
		t.Fatalf("profinfer report: %v\n%s", err, text)
	}
	for _, want := range []string{
		fmt.Sprintf("(pid %d)", oom.PID()),
		fmt.Sprintf("ended: killed by SIGKILL: the OOM killer, for memory cgroup %s's limit (%.1f MB; usage ", cgroup, float64(oomLimit)/1e6),
		"ended: killed by SIGTERM; ",
		"Killed by the OOM killer of memory cgroup",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
}

// signalOf is the signal that killed p, which has exited; 0 where it exited.
func signalOf(p *testbench.Process) syscall.Signal {
	var ws syscall.WaitStatus
	if st := p.Cmd.ProcessState; st != nil {
		ws, _ = st.Sys().(syscall.WaitStatus)
	}
	if !ws.Signaled() {
		return 0
	}
	return ws.Signal()
}
