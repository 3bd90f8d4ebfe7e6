//go:build e2e

package page

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// The page renders every section in a real browser, with no script error, and the
// hostile strings show as text: nothing they hold runs.
func TestPageInBrowser(t *testing.T) {
	br := testbench.RequireBrowser(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	if err := WriteFile(path, full()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom, consoleErrors, err := br.DOM(ctx, "file://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if len(consoleErrors) > 0 {
		t.Errorf("console errors: %q", consoleErrors)
	}
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	var imgs, pwned int
	var errorsText, modelText string
	ids := map[string]bool{}
	testbench.Walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		for _, a := range n.Attr {
			switch {
			case a.Key == "data-pwned":
				pwned++
			case a.Key == "id":
				ids[a.Val] = true
				if a.Val == "page-errors" {
					errorsText = testbench.Text(n)
				}
			case a.Key == "class" && a.Val == "model-name":
				modelText = testbench.Text(n)
			}
		}
		if n.Data == "img" {
			imgs++
		}
	})
	if pwned > 0 || imgs > 0 {
		t.Errorf("hostile markup ran or was inserted: %d data-pwned, %d img", pwned, imgs)
	}
	if modelText != hostile {
		t.Errorf("model name shown as %q, want the hostile string as text", modelText)
	}
	if errorsText != "" {
		t.Errorf("page errors: %s", errorsText)
	}
	if !strings.Contains(testbench.Text(doc), "time to first token p50, of 9 requests") {
		t.Error("the requests' tiles are not rendered")
	}
	if !strings.Contains(testbench.Text(doc), "Nodes on VK, timed by the device") {
		t.Error("the device's own op times are not rendered")
	}
	for _, want := range []string{
		hostile + " in this decode: 1 split of 95 nodes, 0.03 ms from handing over to done, the CPU waiting 0.02 ms of it; 1 copy queued to it (4096 bytes)",
		"VK in this decode: 1 split of 12 nodes, 0.05 ms from handing over to done, the CPU waiting 0.04 ms of it.",
	} {
		if !strings.Contains(testbench.Text(doc), want) {
			t.Errorf("the timeline's device work lacks %q", want)
		}
	}
	for _, id := range []string{"findings", "throughput", "phase-prefill", "phase-decode", "ops-decode", "roofline", "timeline", "moe", "backends", "sched"} {
		if !ids[id] {
			t.Errorf("section %s not rendered", id)
		}
	}
	if err := os.MkdirAll("../../build", 0o755); err == nil {
		if err := br.Screenshot(ctx, "file://"+path, "../../build/page-test.png", 1400, 3000); err != nil {
			t.Error(err)
		}
	}

	// A decode no window traced yet: the page says what it waits for, and when. A share
	// over one graph, with one more left out, is no verdict: no orange tile.
	v := full()
	v.Processes[0].NextWindow = time.Now().Add(8 * time.Second)
	dec := v.Processes[0].Phases[1]
	dec.TracedGraphs, dec.Ops, dec.Layers, dec.OpLayer = 0, nil, nil, nil
	dec.CPU = &summary.ThreadsCPU{Graphs: 1, Perturbed: 1, ThreadSeconds: 0.2, OnCPU: 0.14, Share: 0.7}
	if err := WriteFile(path, v); err != nil {
		t.Fatal(err)
	}
	dom, consoleErrors, err = br.DOM(ctx, "file://"+path)
	if err != nil || len(consoleErrors) > 0 {
		t.Fatalf("waiting page: %v %q", err, consoleErrors)
	}
	text := testbench.Text(mustParse(t, dom))
	for _, want := range []string{"No decode graph traced node by node yet: the next sampling window opens in ", "(1 left out: they ran while profinfer attached or placed probes)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the waiting page lacks %q", want)
		}
	}
	if strings.Contains(dom, `class="tile starved"`) || strings.Contains(text, "time: starved") {
		t.Error("a share over one graph was judged starved")
	}
}

func mustParse(t *testing.T, dom string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
