//go:build e2e

package receiver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/testbench"
)

// A server idles while its model's pages are reclaimed (its memory cgroup's file pages
// taken back, as other work's pressure would), and its next prompt reads them back from
// a disk of a fixed pace: idle-reclaimed, not threads-blocked. The same idle spell in a server whose
// memory is left alone raises nothing of the kind.
func TestE2EIdleReclaimed(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	cfg, _, _ := defaultConfig(t, out) // make run's
	runCollector(t, ctx, cfg)
	f16 := e.Model("llama-1b-f16")
	st, err := os.Stat(f16)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(wrap func(string, ...string) (string, []string), idle func()) int {
		s, err := e.StartServerWith(ctx, wrap, e.Bin("llama-server"), "llama-1b-f16", 2)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		for _, prompt := range []string{"Once upon a time", "The weather today", "A recipe for bread"} {
			if _, err := s.CompleteCached(ctx, prompt, 8); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		idle()
		time.Sleep(time.Second)
		if _, err := s.CompleteCached(ctx, "In a distant galaxy", 8); err != nil {
			t.Fatal(err)
		}
		return s.PID()
	}
	healthy := serve(nil, func() {})
	// Its pages charged to the cgroup: read by the server, not found in the page cache;
	// read back from a disk of 800 MB/s, some 3 s for the model's 2.2 GB, where an
	// unthrottled disk of these machines reads it in under a second.
	cg := testbench.MemoryLimit(t, 2*st.Size()+1<<30)
	testbench.Evict(t, f16)
	reclaimed := serve(testbench.Within(cg, testbench.ReadLimit(t, f16, 800<<20)), func() { cg.Reclaim(t) })
	settle(t, ctx, out)
	v := summarize(t, out)
	advise.Annotate(v)

	p := byPID(t, v, healthy)
	t.Logf("left alone: resumed %+v, findings %v", p.Resumed, findingIDs(p))
	if f := finding(p, "idle-reclaimed"); f != nil {
		t.Errorf("left alone while idle: %s", f.Title)
	}
	p = byPID(t, v, reclaimed)
	t.Logf("reclaimed: resumed %+v, findings %v", p.Resumed, findingIDs(p))
	f := finding(p, "idle-reclaimed")
	if r := p.Resumed; f == nil || r == nil || r.Faults == 0 || r.Idle < 2 || r.Phase != "prefill" {
		t.Fatalf("reclaimed while idle: no finding of it (resumed %+v): %v", p.Resumed, p.Findings)
	}
	t.Logf("%s: %s %v", f.Severity, f.Title, f.Evidence)
	for _, f := range p.Findings {
		if f.Severity == "warning" && f.ID != "idle-reclaimed" && f.ID != "cold-start" { // its start read the evicted model too
			t.Errorf("reclaimed while idle: another cause's finding: %s %s", f.ID, f.Title)
		}
	}
}
