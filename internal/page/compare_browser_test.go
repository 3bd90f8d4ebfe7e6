//go:build e2e

package page

import (
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/compare"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/testbench"
)

// compareFiles compares two recordings as `profinfer compare A B` does.
func compareFiles(t *testing.T, a, b string) *compare.Comparison {
	t.Helper()
	var sides []*compare.Side
	for i, path := range []string{a, b} {
		s := compare.NewSide(string(rune('A'+i)), compare.Selection{Spec: filepath.Base(path), Files: []string{path}})
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := report.Read(z, path, s); err != nil {
			t.Fatal(err)
		}
		sides = append(sides, s)
	}
	c, err := compare.Diff(sides[0], sides[1], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compare.html of a real pair, llama-bench -t 1 against -t 2, says in a browser what
// the comparison says: both phases faster beyond noise, MUL_MAT q4_0 the most of it, the
// threads what differs; and each row's bar draws the noise its verdict was judged by.
func TestCompareInBrowser(t *testing.T) {
	br := testbench.RequireBrowser(t)
	c := compareFiles(t, "testdata/t1.jsonl.gz", "testdata/t2.jsonl.gz")
	path := filepath.Join(t.TempDir(), "compare.html")
	if err := WriteCompareFile(path, c); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom, consoleErrors, err := br.DOMShot(ctx, "file://"+path, testbench.Shot{Path: "../../build/compare-test.png", Width: 1400, Height: 2400})
	if err != nil {
		t.Fatal(err)
	}
	if len(consoleErrors) > 0 {
		t.Errorf("console errors: %q", consoleErrors)
	}
	doc := mustParse(t, dom)
	checkComparison(t, doc, c)
	var differs []string
	testbench.Walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" && attr(n, "class") == "differs" {
			differs = append(differs, cells(n)[1])
		}
	})
	// The recording's decode spans predate the context's settings on them: its context's
	// threads are unknown, and differ from nothing.
	if !slices.Equal(differs, []string{"threads", "threads on a CPU"}) {
		t.Errorf("the setup's differences are %q", differs)
	}

	// Hostile strings show as text, and a move and the rows on one side only are called
	// out.
	if err := WriteCompareFile(path, hostileComparison()); err != nil {
		t.Fatal(err)
	}
	dom, consoleErrors, err = br.DOM(ctx, "file://"+path)
	if err != nil || len(consoleErrors) > 0 {
		t.Fatalf("a hostile comparison: %v %q", err, consoleErrors)
	}
	doc = mustParse(t, dom)
	var pwned int
	testbench.Walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "img" || attr(n, "data-pwned") != "") {
			pwned++
		}
	})
	text := testbench.Text(doc)
	if pwned > 0 || !strings.Contains(text, hostile+" (pid 1)") {
		t.Errorf("hostile markup ran or was inserted (%d elements), or its text is not shown", pwned)
	}
	for _, want := range []string{"Moved from CPU to Vulkan: 48 nodes of layers 0–1", "On one side only: device work (handing over to done) (only in B, +2.00 ms); RMS_NORM " + hostile + " (only in A, -0.100 ms)."} {
		if !strings.Contains(text, want) {
			t.Errorf("the comparison lacks %q", want)
		}
	}
	checkComparison(t, doc, hostileComparison())
}

// checkComparison checks a rendered comparison against c: each phase's verdict in words,
// its largest row with its share, and each row's bar, whose noise band must give the
// row's verdict.
func checkComparison(t *testing.T, doc *html.Node, c *compare.Comparison) {
	t.Helper()
	if errs := byID(doc, "page-errors"); errs == nil || testbench.Text(errs) != "" {
		t.Errorf("page errors: %q", testbench.Text(errs))
	}
	for _, ph := range c.Phases {
		s := byID(doc, "compare-"+ph.Phase)
		if s == nil {
			t.Errorf("no section for %s", ph.Phase)
			continue
		}
		want := ph.Verdict
		if ph.Beyond {
			want += ", beyond noise"
		}
		var verdict string
		var rows [][]string
		var bands []string
		testbench.Walk(s, func(n *html.Node) {
			switch {
			case n.Type != html.ElementNode:
			case strings.Contains(attr(n, "class"), "verdict"):
				verdict = testbench.Text(n.FirstChild)
			case n.Data == "tr" && attr(n, "data-kind") != "":
				rows = append(rows, cells(n))
			case n.Data == "svg" && len(rows) > 0:
				bands = append(bands, attr(n, "data-band"))
			}
		})
		if verdict != want {
			t.Errorf("%s: the verdict reads %q, want %q", ph.Phase, verdict, want)
		}
		if len(rows) != len(ph.Rows) || len(bands) != len(rows) {
			t.Fatalf("%s: %d rows and %d bars, want %d", ph.Phase, len(rows), len(bands), len(ph.Rows))
		}
		if top := ph.Rows[0]; !strings.HasPrefix(rows[0][1], top.Op) || rows[0][6] != fmt.Sprintf("%.0f%%", 100*top.Share) {
			t.Errorf("%s: the largest row reads %q, want %s with %.0f%% of the change", ph.Phase, rows[0], top.Op, 100*top.Share)
		}
		for i, r := range ph.Rows {
			band, err := strconv.ParseFloat(bands[i], 64)
			if beyond := r.Change.Low > band || r.Change.High < -band; err != nil || beyond != r.Beyond || math.IsNaN(band) {
				t.Errorf("%s: row %q drawn against a band of %s ms, which says beyond noise %v; the comparison says %v", ph.Phase, rows[i][1], bands[i], beyond, r.Beyond)
			}
		}
	}
}

func byID(doc *html.Node, id string) *html.Node {
	var found *html.Node
	testbench.Walk(doc, func(n *html.Node) {
		if found == nil && n.Type == html.ElementNode && attr(n, "id") == id {
			found = n
		}
	})
	return found
}

func cells(tr *html.Node) []string {
	var out []string
	for c := tr.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode {
			out = append(out, testbench.Text(c))
		}
	}
	return out
}
