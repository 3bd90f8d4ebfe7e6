//go:build e2e

package viewexporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/testbench"
)

// The live page's compare view, opened by a link, compares two processes the exporter
// saw, and a process before and after its mark, as compare.html draws a comparison.
func TestCompareViewInBrowser(t *testing.T) {
	br := testbench.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, srv := testView(t)
	read(t, t1, pipeline{v})
	read(t, t2, pipeline{v})
	doc := load(ctx, t, br, srv.URL+"/#compare&a=361&b=527", &testbench.Shot{Path: "../build/compare-view-test.png", Width: 1400, Height: 2000})
	picked := map[string]string{}
	testbench.Walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "option" && has(n, "selected") {
			picked[attr(n.Parent, "name")] = testbench.Text(n)
		}
	})
	if !strings.Contains(picked["a"], "(pid 361)") || !strings.Contains(picked["b"], "(pid 527)") {
		t.Errorf("picked %q", picked)
	}
	if b := byID(doc, "compare-button"); b == nil || attr(b, "class") != "active" {
		t.Error("the header's compare button is missing, or not active")
	}
	for _, phase := range []string{"prefill", "decode"} {
		verdict, top := phaseOf(t, doc, phase)
		if verdict != "faster, beyond noise" || !strings.HasPrefix(top, "MUL_MAT q4_0") {
			t.Errorf("%s: %q, the largest row %q", phase, verdict, top)
		}
	}

	// A process marked: the view opens on it before and after the mark.
	v, srv = testView(t)
	markedRun(t, v, srv)
	doc = load(ctx, t, br, srv.URL+"/#compare", nil)
	if a := byID(doc, "compare-sides"); a == nil || !strings.Contains(testbench.Text(a), "A: before the mark at ") || !strings.Contains(testbench.Text(a), "B: since the mark at ") {
		t.Errorf("the sides before and after the mark are not compared: %v", a)
	}
	if verdict, _ := phaseOf(t, doc, "prefill"); verdict != "only in A" {
		t.Errorf("prefill, before the mark only, reads %q", verdict)
	}
}

// load loads url in br, saving shot too where there is one, and returns the document.
func load(ctx context.Context, t *testing.T, br *testbench.Browser, url string, shot *testbench.Shot) *html.Node {
	t.Helper()
	var dom string
	var consoleErrors []string
	var err error
	if shot != nil {
		dom, consoleErrors, err = br.DOMShot(ctx, url, *shot)
	} else {
		dom, consoleErrors, err = br.DOM(ctx, url)
	}
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
	if e := byID(doc, "page-errors"); e == nil || testbench.Text(e) != "" {
		t.Errorf("page errors: %v", e)
	}
	return doc
}

// phaseOf returns a phase's verdict as the page words it, and its largest row's name.
func phaseOf(t *testing.T, doc *html.Node, phase string) (verdict, top string) {
	t.Helper()
	s := byID(doc, "compare-"+phase)
	if s == nil {
		t.Fatalf("no section for %s", phase)
	}
	testbench.Walk(s, func(n *html.Node) {
		switch {
		case n.Type != html.ElementNode:
		case strings.Contains(attr(n, "class"), "verdict") && verdict == "":
			verdict = testbench.Text(n.FirstChild)
		case n.Data == "tr" && attr(n, "data-kind") != "" && top == "":
			top = testbench.Text(n.FirstChild.NextSibling)
		}
	})
	return verdict, top
}

func byID(doc *html.Node, id string) *html.Node {
	var found *html.Node
	testbench.Walk(doc, func(n *html.Node) {
		if found == nil && attr(n, "id") == id {
			found = n
		}
	})
	return found
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func has(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}
