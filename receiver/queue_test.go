//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/testbench"
)

// Four requests at once to llama-server: with one slot (`-np 1`) three wait for it, each
// longer than the last (requests-queued, in the report and the pipeline); with four
// slots every request starts at once, and nothing is said, though each waited for the
// decode in progress when it came.
func TestE2ERequestsQueued(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out.pb")
	cfg, _, prom := defaultConfig(t, out) // make run's: its findings reach the file and Prometheus
	col := runCollector(t, ctx, cfg)
	// The connection hooks cost every socket call of the machine (every syscall, on a
	// kernel before 6.5): attached only while a process is traced.
	if n := syscallHooks(t, col.PID()); n != 0 {
		t.Errorf("%d connection hooks before any process was traced", n)
	}
	burst := func(slots int) int {
		s, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2, "-np", fmt.Sprint(slots))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		if n := syscallHooks(t, col.PID()); n == 0 {
			t.Error("no connection hooks while llama-server is traced")
		}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Complete(ctx, fmt.Sprintf("Request %d: tell me about the weather in the mountains today.", i), 16); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return s.PID()
	}
	one := burst(1)
	four := burst(4)
	settle(t, ctx, out)
	for end := time.Now().Add(10 * time.Second); syscallHooks(t, col.PID()) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Errorf("%d connection hooks 10 s after the last traced process ended", syscallHooks(t, col.PID()))
			break
		}
	}
	v := summarize(t, out)
	advise.Annotate(v)

	p := byPID(t, v, four)
	t.Logf("-np 4: requests %+v, wait %+v, findings %v", p.Requests, p.Requests.Wait, findingIDs(p))
	if r := p.Requests; r == nil || r.Wait == nil || r.Wait.Count != 4 || r.MaxShared == 0 {
		t.Fatalf("-np 4: want 4 requests' arrivals seen, computed together: %+v", r)
	}
	if f := finding(p, "requests-queued"); f != nil {
		t.Errorf("-np 4: %s %v", f.Title, f.Evidence)
	}
	p = byPID(t, v, one)
	r := p.Requests
	t.Logf("-np 1: requests %+v, wait %+v, findings %v", r, r.Wait, findingIDs(p))
	f := finding(p, "requests-queued")
	if f == nil || r.Queued != 3 || r.MaxShared != 0 || r.Wait == nil || r.Wait.Count != 4 {
		t.Fatalf("-np 1: want 3 of 4 requests queued and the finding: requests %+v: %v", r, p.Findings)
	}
	t.Logf("%s: %s %v", f.Severity, f.Title, f.Evidence)
	// Each waits for the ones before it: the last about three requests' time.
	if each := (r.TTFT.P50 + 15*r.TPOT.P50) / 1e3; r.Wait.Max/1e3 < 2*each || f.Severity != "warning" {
		t.Errorf("-np 1: the longest wait %.2f s against %.2f s a request; %s", r.Wait.Max/1e3, each, f.Severity)
	}
	if f.Gain == nil || f.Gain.Saved < r.Wait.Max/1e3 {
		t.Errorf("-np 1: the time saved %+v, want the waits", f.Gain)
	}
	for _, f := range p.Findings {
		if f.Severity == "warning" && f.ID != "requests-queued" {
			t.Errorf("-np 1: another cause's finding: %s %s", f.ID, f.Title)
		}
	}
	got := findingsOut(t, ctx, out, prom, func(got pipelineFindings) bool {
		return got.logged[int64(one)]["requests-queued"] != ""
	})
	if got.logged[int64(one)]["requests-queued"] == "" || got.logged[int64(four)]["requests-queued"] != "" {
		t.Errorf("the pipeline's findings: %v", got.logged)
	}
}

// Ollama as it ships, one slot a model (OLLAMA_NUM_PARALLEL=1): ollama serve holds each
// request until its runner's slot is free, so the runner sees them one at a time; their
// arrival is taken at ollama serve, the runner's front. Two requests one after the other
// wait for nothing; of four at once, three wait, and the finding says it in Ollama's words.
func TestE2EOllamaQueued(t *testing.T) {
	e := testbench.Require(t)
	testbench.RequireOllama(t, e.OllamaExe())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out.pb")
	cfg, _, prom := defaultConfig(t, out)
	runCollector(t, ctx, cfg)
	o, err := testbench.StartOllama(ctx, e.OllamaExe(), t.TempDir(), "OLLAMA_NUM_PARALLEL=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	if err := o.Create(ctx, "llama-1b", e.Model("llama-1b-q4_0")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := o.Generate(ctx, "llama-1b", "The capital of France is", 8, ""); err != nil {
			t.Fatal(err)
		}
	}
	pid := runner(t, ctx, o)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := o.Generate(ctx, "llama-1b", fmt.Sprintf("Request %d: tell me about the weather in the mountains today.", i), 16, ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	settle(t, ctx, out)
	v := summarize(t, out)
	advise.Annotate(v)
	p := byPID(t, v, pid)
	r := p.Requests
	t.Logf("runner %d: requests %+v, wait %+v, findings %v", pid, r, r.Wait, findingIDs(p))
	f := finding(p, "requests-queued")
	// The first request's arrival at ollama serve came before its runner was started, let
	// alone traced: its runner's own connection may answer (a streamed answer's headers)
	// before its first decode or after, and it is taken only after.
	if f == nil || r.Count != 6 || r.Queued != 3 || r.Wait == nil || r.Wait.Count < 5 {
		t.Fatalf("want 5 or 6 requests' arrivals seen and 3 queued, with the finding: requests %+v: %v", r, p.Findings)
	}
	t.Logf("%s: %s %v; %s", f.Severity, f.Title, f.Evidence, f.Advice)
	if !strings.Contains(f.Advice, "OLLAMA_NUM_PARALLEL") {
		t.Errorf("the advice is not in Ollama's words: %s", f.Advice)
	}
	for _, f := range p.Findings {
		if f.Severity == "warning" && f.ID != "requests-queued" {
			t.Errorf("another cause's finding: %s %s", f.ID, f.Title)
		}
	}
	got := findingsOut(t, ctx, out, prom, func(got pipelineFindings) bool { return got.logged[int64(pid)]["requests-queued"] != "" })
	if got.logged[int64(pid)]["requests-queued"] == "" {
		t.Errorf("the pipeline's findings: %v", got.logged)
	}
}

// syscallHooks counts the links of the connections layer's programs (either set) that
// process pid holds: its own (another package's tests may hold theirs meanwhile).
func syscallHooks(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		b, err := os.ReadFile(filepath.Join(dir, fd.Name()))
		if err != nil || !strings.Contains(string(b), "link_type:") {
			continue
		}
		var id uint32
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "prog_id:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &id)
			}
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if err != nil {
			continue
		}
		if pi, err := prog.Info(); err == nil && (slices.Contains(probe.ConnSockets, pi.Name) || slices.Contains(probe.ConnSyscalls, pi.Name)) {
			n++
		}
		prog.Close()
	}
	return n
}
