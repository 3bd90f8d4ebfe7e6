//go:build e2e

package receiver

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Stripped builds. A llama-bench whose GGML libraries and libllama lost their symbol
// tables keeps what their dynamic symbols allow, which is everything but the thread exit
// probe (a local function): the collector names that symbol and what its absence costs,
// and profiles the rest. A static llama-server stripped whole defines nothing profinfer
// can probe: the collector says so, naming the symbols.
func TestE2EStripped(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := copyBuild(t, e)
	static := filepath.Join(dir, "llama-server-static")
	if out, err := exec.Command("cp", e.StaticServer(), static).CombinedOutput(); err != nil {
		t.Fatalf("copying the static server: %v: %s", err, out)
	}
	strip := exec.Command("strip", "--strip-all", "libggml-base.so.0.25.1", "libggml-cpu.so", "libllama.so.0.5.0", "llama-server-static")
	strip.Dir = dir
	if out, err := strip.CombinedOutput(); err != nil {
		t.Fatalf("strip: %v: %s", err, out)
	}
	bench := filepath.Join(dir, "llama-bench")
	c := startCollectorOf(t, ctx, []string{bench, static}, "nodes: {mode: all, barriers: true}, counters: [task-clock]")

	b := startBenchIn(t, dir, e.BenchArgs("llama-1b-q4_0", 16, 16, 2, 2)...)
	defer b.Stop()
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	s, err := e.StartServer(ctx, static, "tiny-dense", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitLogged(t, c, "GGML process not profiled", s.PID(), started, 10*time.Second)
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)
	log := c.proc.Stderr.String()
	for _, want := range []string{
		filepath.Join(dir, "libggml-cpu.so") + " lacks ggml_graph_compute_thread (stripped?): no counts outside nodes",
		static + " is a GGML build stripped of its symbol table: it defines none of ggml_tensor_overhead, ggml_graph_compute, llama_decode",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the collector did not log %q:\n%s", want, log)
		}
	}
	checkProfile(t, traces, metrics, 16)
}
