//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// pageFacts is what a newcomer reads off the live page of one process.
type pageFacts struct {
	model        string
	decodeOps    int             // rows of the decode op table
	waiting      []string        // phases' "no graph traced yet" lines
	starvedTiles []string        // the phases whose on-CPU tile reads starved
	rules        map[string]bool // the findings shown
	starvedOps   int             // op table rows judged starved
}

func readPage(t *testing.T, ctx context.Context, br *testbench.Browser, url string) pageFacts {
	t.Helper()
	dom, consoleErrors, err := br.DOM(ctx, url)
	if err != nil || len(consoleErrors) > 0 {
		t.Fatalf("%s: %v %q", url, err, consoleErrors)
	}
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	f := pageFacts{rules: map[string]bool{}}
	testbench.Walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		class := attr(n, "class")
		switch {
		case class == "model-name":
			f.model = testbench.Text(n)
		case class == "empty waiting":
			f.waiting = append(f.waiting, testbench.Text(n))
		case attr(n, "data-oncpu") != "" && strings.Contains(class, "starved"):
			f.starvedTiles = append(f.starvedTiles, attr(n, "data-oncpu"))
		case attr(n, "data-rule") != "":
			f.rules[attr(n, "data-rule")] = true
		case class == "bound-starved":
			f.starvedOps++
		case attr(n, "id") == "ops-decode":
			testbench.Walk(n, func(tr *html.Node) {
				if tr.Type == html.ElementNode && tr.Data == "tr" && tr.Parent.Data == "tbody" {
					f.decodeOps++
				}
			})
		}
	})
	return f
}

// defaultConfig is make run's configuration, unedited but for its ports, the page's and
// Prometheus's, and its file, out.
func defaultConfig(t *testing.T, out string) (cfg string, page, prom int) {
	t.Helper()
	raw, err := os.ReadFile("../config/otelcol.yaml")
	if err != nil {
		t.Fatal(err)
	}
	page, prom = freePort(t), freePort(t)
	cfg = strings.NewReplacer("127.0.0.1:9465", fmt.Sprintf("127.0.0.1:%d", page),
		"127.0.0.1:9464", fmt.Sprintf("127.0.0.1:%d", prom), "./profinfer-output.pb", out).Replace(string(raw))
	if cfg == string(raw) || !strings.Contains(cfg, out) || !strings.Contains(cfg, strconv.Itoa(prom)) {
		t.Fatal("config/otelcol.yaml no longer names the ports and file this test moves")
	}
	return cfg, page, prom
}

// A newcomer's first minute, with make run's configuration: a llama-server on the 1B
// model, requests of 48 tokens for 15 s. Within 5 s of the first request the page has a
// decode op table (the first windows go to the phases none has traced), and on this
// quiet machine, in Chromium, no tile, op or finding says starved, though the first
// window's graph ran as the collector attached. Before any decode, the page says what
// it waits for. The model is named. Then a server of 2-token answers, whose decode table
// comes within 5 s too.
func TestE2ENewcomerPage(t *testing.T) {
	e := testbench.Require(t)
	br := testbench.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg, port, _ := defaultConfig(t, out)
	c := &collector{proc: runCollector(t, ctx, cfg), out: out}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	started := time.Now()
	srv, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitLogged(t, c, "attached", srv.PID(), started, 30*time.Second)
	page := fmt.Sprintf("%s#pid=%d", url, srv.PID())

	first := time.Now()
	done := make(chan error, 1)
	go func() { // four requests at least, over 15 s at least: windows past the first ones
		for i := 0; i < 4 || time.Since(first) < 15*time.Second; i++ {
			if _, err := srv.Complete(ctx, "Once upon a time", 48); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// Without the first windows going to untraced phases, the decode's came with the
	// window sample_interval (10 s) after the warm-up's.
	decodeTableWithin(t, url, srv.PID(), first, 5*time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	served := time.Since(first)
	time.Sleep(2 * time.Second) // a collection interval, and the view's refresh
	f := readPage(t, ctx, br, page)
	t.Logf("after %.1f s of serving: model %q, %d decode ops, starved tiles %v, %d starved ops, findings %v, waiting %q",
		served.Seconds(), f.model, f.decodeOps, f.starvedTiles, f.starvedOps, f.rules, f.waiting)
	if f.model == "" {
		t.Error("the page names no model")
	}
	if f.decodeOps == 0 || len(f.waiting) > 0 {
		t.Errorf("the page has %d decode op rows and waits for %q", f.decodeOps, f.waiting)
	}
	if len(f.starvedTiles) > 0 || f.starvedOps > 0 || f.rules["threads-contended"] || f.rules["threads-queued"] || f.rules["threads-blocked"] {
		t.Errorf("a quiet machine read starved: tiles %v, %d ops, findings %v", f.starvedTiles, f.starvedOps, f.rules)
	}
	for _, p := range getView(t, url).Processes {
		for _, ph := range p.Phases {
			if ph.CPU != nil {
				t.Logf("%s: threads on a CPU %.1f%% of %d graphs, %d left out as perturbed", ph.Name, 100*ph.CPU.Share, ph.CPU.Graphs, ph.CPU.Perturbed)
			}
		}
	}

	// A server of short answers, 2 tokens 0.5 s apart: each request's one decode graph
	// follows its prefill's, so a window brought forward for the decode, as its graph is
	// read, traces the next request's prefill first, and goes on to the decode after it.
	// Without that, every catch-up traced a prefill, and the windows an interval apart
	// mostly did.
	srv.Stop()
	short, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer short.Stop()
	waitLogged(t, c, "attached", short.PID(), time.Now(), 30*time.Second)
	first = time.Now()
	asking, asked := make(chan struct{}), make(chan error, 1)
	go func() {
		for {
			if _, err := short.Complete(ctx, "Once upon a time", 2); err != nil {
				asked <- err
				return
			}
			select {
			case <-asking:
				asked <- nil
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	decodeTableWithin(t, url, short.PID(), first, 5*time.Second)
	close(asking)
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
}

// decodeTableWithin polls the view's API, as the page reads it, for process pid's decode
// op table, and wants it within limit of the first request, at first.
func decodeTableWithin(t *testing.T, url string, pid int, first time.Time, limit time.Duration) {
	t.Helper()
	title := fmt.Sprintf("(pid %d)", pid)
	var at time.Duration
	for at == 0 && time.Since(first) < limit+10*time.Second {
		time.Sleep(500 * time.Millisecond)
		for _, p := range getView(t, url).Processes {
			if !strings.Contains(p.Title, title) {
				continue
			}
			for _, ph := range p.Phases {
				if ph.Name == "decode" && len(ph.Ops) > 0 {
					at = time.Since(first)
				}
			}
		}
	}
	t.Logf("pid %d's decode op table on the page %.1f s after the first request", pid, at.Seconds())
	if at == 0 || at > limit {
		t.Errorf("pid %d's decode op table came %v after the first request, want within %v", pid, at, limit)
	}
}

// A short llama-bench (64 tokens, once: beside busy loops a run's time spreads widely, 6 s
// to past 4 minutes for 3x as many) beside two busy loops, under the default config (a
// window every 10 s, to the phases first): the page's verdict of starved and the finding
// come together, from the same graphs, or neither does; every op of a starved phase is
// judged starved, and none of one that is not.
func TestE2EBusyDefault(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	bench := e.Bin("llama-bench")
	runCollector(t, ctx, viewConfig("profinfer", fmt.Sprintf("{targets: [{executable: %q}]}", bench), out, freePort(t)))
	for range 2 { // one per core
		testbench.BusyLoop(t, -1)
	}
	began := time.Now()
	if _, err := testbench.Run(ctx, bench, e.BenchArgs("llama-1b-q4_0", 16, 64, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	t.Logf("llama-bench beside two busy loops: %.0f s", time.Since(began).Seconds())
	settle(t, ctx, out)
	v := summarize(t, out)
	advise.Annotate(v)
	if len(v.Processes) != 1 {
		t.Fatalf("%d processes", len(v.Processes))
	}
	p := v.Processes[0]
	fired := map[string]bool{}
	for _, f := range p.Findings {
		fired[f.ID] = true
	}
	anyStarved := false
	for _, ph := range p.Phases {
		if ph.CPU == nil {
			continue
		}
		c := ph.CPU
		t.Logf("%s: threads on a CPU %.0f%% of %d graphs (%d perturbed), starved %v; %d traced graphs", ph.Name, 100*c.Share, c.Graphs, c.Perturbed, c.Starved, ph.TracedGraphs)
		anyStarved = anyStarved || c.Starved
		for _, o := range ph.Ops {
			if (o.Bound == "starved") != c.Starved {
				t.Errorf("%s: op %s %s judged %q in a phase starved %v", ph.Name, o.Op, o.Weight, o.Bound, c.Starved)
			}
		}
	}
	if found := fired["threads-contended"] || fired["threads-queued"] || fired["threads-blocked"]; found != anyStarved {
		t.Errorf("a phase starved %v, a starved finding %v: %v", anyStarved, found, findingIDs(p))
	}
	if !tracedPhase(p, "decode") {
		t.Errorf("no decode phase traced: %+v", p.Phases)
	}
}

// tracedPhase says whether p has a phase name with a graph traced node by node.
func tracedPhase(p *summary.Process, name string) bool {
	for _, ph := range p.Phases {
		if ph.Name == name && ph.TracedGraphs > 0 {
			return true
		}
	}
	return false
}
