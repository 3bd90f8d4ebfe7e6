//go:build e2e

package receiver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/testbench"
)

// A conversation of four turns to llama-server, each turn's prompt the last one's and
// more: sent with cache_prompt off, every turn computes the whole conversation again
// (prompt-recomputed, in the report and the pipeline); sent with it on, each turn reads
// the last one's tokens from the cache, and nothing is said.
func TestE2EPromptRecomputed(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out.pb")
	cfg, _, prom := defaultConfig(t, out) // make run's: its findings reach the file and Prometheus
	runCollector(t, ctx, cfg)
	system := strings.Repeat("You are a careful assistant who answers in plain words. ", 6)
	converse := func(cached bool) int {
		s, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		prompt := system
		for turn := range 4 {
			prompt += "User: tell me more about the weather in the mountains today. Assistant:"
			if !cached {
				if _, err := s.Complete(ctx, prompt, 8); err != nil {
					t.Fatal(err)
				}
				continue
			}
			c, err := s.CompleteCached(ctx, prompt, 8)
			if err != nil {
				t.Fatal(err)
			}
			if turn > 0 && c.Timings.CacheN < 64 {
				t.Fatalf("cache_prompt on: turn %d read %d tokens from the cache, computed %d", turn, c.Timings.CacheN, c.Timings.PromptN)
			}
		}
		return s.PID()
	}
	recomputed := converse(false)
	reused := converse(true)
	settle(t, ctx, out)
	v := summarize(t, out)
	advise.Annotate(v)

	p := byPID(t, v, reused)
	t.Logf("cache_prompt on: requests %+v, findings %v", p.Requests, findingIDs(p))
	if f := finding(p, "prompt-recomputed"); f != nil || p.Requests == nil || p.Requests.Cached == 0 {
		t.Errorf("cache_prompt on: %v, requests %+v", f, p.Requests)
	}
	p = byPID(t, v, recomputed)
	t.Logf("cache_prompt off: requests %+v, findings %v", p.Requests, findingIDs(p))
	f := finding(p, "prompt-recomputed")
	if r := p.Requests; f == nil || r.Recomputed != 3 || r.Cached != 0 || f.Severity != "warning" {
		t.Fatalf("cache_prompt off: no finding of it (requests %+v): %v", p.Requests, p.Findings)
	}
	t.Logf("%s: %s %v", f.Severity, f.Title, f.Evidence)
	if f.Gain == nil || f.Gain.Saved <= 0 {
		t.Errorf("cache_prompt off: no cost estimated: %+v", f.Gain)
	}
	for _, f := range p.Findings {
		if f.Severity == "warning" && f.ID != "prompt-recomputed" {
			t.Errorf("cache_prompt off: another cause's finding: %s %s", f.ID, f.Title)
		}
	}
	got := findingsOut(t, ctx, out, prom, func(got pipelineFindings) bool {
		return got.logged[int64(recomputed)]["prompt-recomputed"] != ""
	})
	if got.logged[int64(recomputed)]["prompt-recomputed"] == "" || got.logged[int64(reused)]["prompt-recomputed"] != "" {
		t.Errorf("the pipeline's findings: %v", got.logged)
	}
}
