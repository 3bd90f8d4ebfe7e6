//go:build e2e

package receiver

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/page"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// checkLeadsWithDevice checks that the views of p, a real process that offloads part of
// its model to Vulkan, open with each backend's part of a token, Vulkan named as a person
// reads it, and title the CPU's op tables as the CPU's part: the text report right after
// the process's heading, report.html right after the process's section.
func checkLeadsWithDevice(t *testing.T, p *summary.Process) {
	t.Helper()
	v := &summary.View{Generated: time.Now(), Processes: []*summary.Process{p}}
	var b strings.Builder
	if err := report.Table(&b, v); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	blocks := strings.Split(text, "\n\n")
	shares := map[string]float64{}
	if len(blocks) > 1 {
		for _, line := range strings.Split(blocks[1], "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasSuffix(f[1], "%") {
				shares[f[0]], _ = strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
			}
		}
	}
	if len(blocks) < 2 || !strings.HasPrefix(blocks[1], "where a token's time went, by backend") || shares["Vulkan"] <= 0 || shares["CPU"] <= 0 {
		t.Errorf("the text report does not open with each backend's part of a token (shares %v):\n%s", shares, text)
	}
	lines := strings.Split(text, "\n")
	tables := 0
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "op  weight  calls") {
			tables++
			if i == 0 || !strings.HasPrefix(lines[i-1], "the CPU's part") {
				t.Errorf("the text report's op table at line %d is not titled the CPU's part:\n%s", i+1, text)
			}
		}
	}
	if tables == 0 {
		t.Errorf("the text report has no op table:\n%s", text)
	}

	br := testbench.RequireBrowser(t)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := page.WriteFile(path, v); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom, consoleErrors, err := br.DOM(ctx, "file://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if len(consoleErrors) > 0 {
		t.Errorf("report.html: console errors %q", consoleErrors)
	}
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	var sections, titles []string
	rows := map[string][]string{} // the lead's, by backend as ggml names it
	testbench.Walk(doc, func(n *html.Node) {
		switch {
		case n.Type != html.ElementNode:
		case n.Data == "section":
			sections = append(sections, attr(n, "id"))
		case n.Data == "h2":
			titles = append(titles, testbench.Text(n))
		case n.Data == "tr" && attr(n, "data-backend") != "":
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				rows[attr(n, "data-backend")] = append(rows[attr(n, "data-backend")], testbench.Text(c))
			}
		}
	})
	vk, cpu := rows["VK"], rows["CPU"]
	if len(sections) < 2 || sections[1] != "lead" || len(vk) < 2 || vk[0] != "Vulkan" || !strings.HasSuffix(vk[1], "%") || len(cpu) < 2 || cpu[0] != "CPU" {
		t.Errorf("report.html does not open with each backend's part of a token: sections %q, the lead's rows %q", sections, rows)
	}
	if !strings.Contains(strings.Join(titles, "\n"), "Where a decode token's time goes on the CPU") {
		t.Errorf("report.html does not title the CPU's ops as the CPU's part: %q", titles)
	}
}
