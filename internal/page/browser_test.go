//go:build e2e

package page

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
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
	dom, consoleErrors, err := br.DOMShot(ctx, "file://"+path, testbench.Shot{Path: "../../build/page-test.png", Width: 1400, Height: 3000})
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
	if !strings.Contains(testbench.Text(doc), "Ended: killed by SIGKILL: "+hostile) {
		t.Error("the process's end is not rendered")
	}
	if !strings.Contains(testbench.Text(doc), "time to first token p50, of 9 requests") {
		t.Error("the requests' tiles are not rendered")
	}
	if !strings.Contains(testbench.Text(doc), "Nodes on Vulkan, timed by the device") {
		t.Error("the device's own op times are not rendered")
	}
	for _, want := range []string{
		hostile + " in this decode: 1 split of 95 nodes, 0.03 ms from handing over to done, the CPU waiting 0.02 ms of it; 1 copy queued to it (4096 bytes)",
		"Vulkan in this decode: 1 split of 12 nodes, 0.05 ms from handing over to done, the CPU waiting 0.04 ms of it.",
	} {
		if !strings.Contains(testbench.Text(doc), want) {
			t.Errorf("the timeline's device work lacks %q", want)
		}
	}
	checkLead(t, doc, summary.LeadOf(full().Processes[0]))
	for _, id := range []string{"lead", "findings", "throughput", "phase-prefill", "phase-decode", "ops-decode", "roofline", "timeline", "moe", "backends", "sched"} {
		if !ids[id] {
			t.Errorf("section %s not rendered", id)
		}
	}

	// A decode no window traced yet: the page says what it waits for, and when. A share
	// over one graph, with one more left out, is no verdict: no orange tile.
	v := full()
	v.Processes[0].NextWindow = time.Now().Add(8 * time.Second)
	dec := v.Processes[0].Phases[1]
	dec.TracedGraphs, dec.Ops, dec.Layers, dec.OpLayer = 0, nil, nil, nil
	dec.CPU = &summary.ThreadsCPU{Graphs: 1, Perturbed: 1, ThreadSeconds: 0.2, OnCPU: 0.14, Share: 0.7,
		Thin: "not judged: 1 graph, 200 ms of thread time, and 1 left out, run while profinfer attached or placed probes (a verdict needs 2 graphs and 100 ms)"}
	if err := WriteFile(path, v); err != nil {
		t.Fatal(err)
	}
	dom, consoleErrors, err = br.DOM(ctx, "file://"+path)
	if err != nil || len(consoleErrors) > 0 {
		t.Fatalf("waiting page: %v %q", err, consoleErrors)
	}
	text := testbench.Text(mustParse(t, dom))
	for _, want := range []string{"No decode graph traced node by node yet: the next sampling window opens in ", "threads on a CPU not judged: 1 graph, 200 ms of thread time, and 1 left out"} {
		if !strings.Contains(text, want) {
			t.Errorf("the waiting page lacks %q", want)
		}
	}
	if strings.Contains(dom, `class="tile starved"`) || strings.Contains(text, "time: starved") {
		t.Error("a share over one graph was judged starved")
	}

	// On the CPU alone, nothing leads but the findings, and the phases are the token's.
	v = full()
	v.Processes[0].Backends, v.Processes[0].Copies, v.Processes[0].Timeline.Device = nil, nil, nil
	if err := WriteFile(path, v); err != nil {
		t.Fatal(err)
	}
	dom, consoleErrors, err = br.DOM(ctx, "file://"+path)
	if err != nil || len(consoleErrors) > 0 {
		t.Fatalf("a page on the CPU alone: %v %q", err, consoleErrors)
	}
	var titles []string
	testbench.Walk(mustParse(t, dom), func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "h2" {
			titles = append(titles, testbench.Text(n))
		}
	})
	if strings.Contains(dom, `id="lead"`) || !slices.Contains(titles, "Where a decode token's time goes") {
		t.Errorf("a page on the CPU alone leads with the backends, or titles its ops the CPU's: %q", titles)
	}
}

// checkLead checks that the page opens, after the process's heading, with each backend's
// part of a token as the text report computes it, and titles the phases' ops the CPU's.
func checkLead(t *testing.T, doc *html.Node, l *summary.Lead) {
	t.Helper()
	var sections []string
	var rows [][]string
	var backends []string
	testbench.Walk(doc, func(n *html.Node) {
		switch {
		case n.Type != html.ElementNode:
		case n.Data == "section":
			sections = append(sections, attr(n, "id"))
		case n.Data == "tr" && attr(n, "data-backend") != "":
			backends = append(backends, attr(n, "data-backend"))
			var row []string
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				row = append(row, testbench.Text(c))
			}
			rows = append(rows, row)
		}
	})
	if len(sections) < 3 || sections[0] != "process" || sections[1] != "lead" {
		t.Errorf("the page's sections are %q: want the process, then the lead", sections)
	}
	ms := func(s float64) string {
		if s == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3f", s*1e3)
	}
	var want [][]string
	for _, p := range l.Parts {
		want = append(want, []string{summary.BackendName(p.Backend), fmt.Sprintf("%.1f%%", 100*p.Share),
			ms(p.Compute), ms(p.HandOver), ms(p.Copies), ms(p.Device), ms(p.Wait), strconv.FormatInt(p.Splits, 10)})
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("the lead's rows (backends %q):\n%q\nwant\n%q", backends, rows, want)
	}
	if text := testbench.Text(doc); !strings.Contains(text, "Where a decode token's time goes on the CPU") || !strings.Contains(text, "The CPU's part: ") {
		t.Error("the phases' ops are not titled the CPU's part")
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

func mustParse(t *testing.T, dom string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
