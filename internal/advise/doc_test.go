package advise

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the rendered tables in docs/findings.md")

const (
	docPath       = "../../docs/findings.md"
	tableTop      = "<!-- Rendered from internal/advise's Rules by go test ./internal/advise -update; do not edit. -->\n"
	tableEnd      = "<!-- End of the rendered table. -->\n"
	thresholdsTop = "<!-- Rendered from internal/advise's Thresholds by go test ./internal/advise -update; do not edit. -->\n"
	thresholdsEnd = "<!-- End of the rendered thresholds. -->\n"
)

// table renders the rules as docs/findings.md's table, one rule a row, in the order their
// findings are listed.
func table() string {
	var b strings.Builder
	b.WriteString("| finding (id) | fires when | reads | says | gives way to |\n|---|---|---|---|---|\n")
	for _, r := range Rules {
		b.WriteString("| " + r.Name + " (`" + r.ID + "`) | " + r.FiresText() + " | `" + strings.Join(r.Reads, "`, `") + "` | " + r.render(r.Says) + " | " + defersText(r) + " |\n")
	}
	return b.String()
}

// defersText says which rules r gives way to, and when: rules deferred to on the same
// condition are named together before it.
func defersText(r Rule) string {
	var parts []string
	ds := r.DefersTo
	for i := 0; i < len(ds); {
		var ids []string
		j := i
		for ; j < len(ds) && ds[j].When == ds[i].When; j++ {
			ids = append(ids, "`"+ds[j].To+"`")
		}
		part := strings.Join(ids, " or ")
		if ds[i].When != "" {
			part += ", " + r.render(ds[i].When)
		}
		parts = append(parts, part)
		i = j
	}
	return strings.Join(parts, "; ")
}

// thresholdsTable renders every rule's thresholds, one a row, in the order of the rules
// that first list them.
func thresholdsTable() string {
	var b strings.Builder
	b.WriteString("| rules | threshold | value | why |\n|---|---|---|---|\n")
	var all []*Threshold
	for _, r := range Rules {
		for _, t := range r.Thresholds {
			if !slices.Contains(all, t) {
				all = append(all, t)
			}
		}
	}
	for _, t := range all {
		var ids []string
		for _, r := range Rules {
			if slices.Contains(r.Thresholds, t) {
				ids = append(ids, "`"+r.ID+"`")
			}
		}
		b.WriteString("| " + strings.Join(ids, ", ") + " | `" + t.Name + "` | " + t.String() + " | " + t.Why + " |\n")
	}
	return b.String()
}

// TestFindingsDoc holds docs/findings.md's rendered tables to the rules themselves;
// -update rewrites them.
func TestFindingsDoc(t *testing.T) {
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	want := doc
	for _, block := range []struct {
		top, end, body string
	}{{tableTop, tableEnd, table()}, {thresholdsTop, thresholdsEnd, thresholdsTable()}} {
		top, end := strings.Index(want, block.top), strings.Index(want, block.end)
		if top < 0 || end < top {
			t.Fatalf("%s has no rendered block between %q and %q", docPath, block.top, block.end)
		}
		want = want[:top+len(block.top)] + block.body + want[end:]
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Errorf("%s's tables are not what internal/advise's Rules say: go test ./internal/advise -update", docPath)
	}
}

// placeholder is a threshold's name in a rule's text.
var placeholder = regexp.MustCompile(`\{([^{}]*)\}`)

// telemetry is a name in backticks that reads as a span attribute's or a metric's:
// dotted, lowercase.
var telemetry = regexp.MustCompile("`[a-z][a-z0-9_]*(\\.[a-z0-9_]+)+`")

// TestRulesData holds each rule's data whole: what the docs render and Findings applies.
// A threshold the text names is one the rule lists, and one it lists the text names (in
// Fires, Says or a Defer's When); each has its reason; a Defer names a rule there is.
func TestRulesData(t *testing.T) {
	ids := map[string]bool{}
	names := map[string]*Threshold{}
	for _, r := range Rules {
		if r.ID == "" || r.Name == "" || r.Fires == "" || r.Says == "" || len(r.Reads) == 0 || r.apply == nil {
			t.Errorf("rule %q lacks its id, name, when it fires, what it reads, what it says or its function", r.ID)
		}
		if ids[r.ID] {
			t.Errorf("two rules are %q", r.ID)
		}
		ids[r.ID] = true
		named := map[string]bool{}
		texts := []string{r.Fires, r.Says}
		for _, d := range r.DefersTo {
			texts = append(texts, d.When)
		}
		for _, text := range texts {
			// The telemetry a rule reads is its Reads, in one place.
			for _, m := range telemetry.FindAllStringSubmatch(text, -1) {
				t.Errorf("%s's text names %s: what a rule reads is its Reads", r.ID, m[0])
			}
			for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
				named[m[1]] = true
				if !slices.ContainsFunc(r.Thresholds, func(th *Threshold) bool { return th.Name == m[1] }) {
					t.Errorf("%s names {%s}, not one of its thresholds", r.ID, m[1])
				}
			}
		}
		for _, th := range r.Thresholds {
			if !named[th.Name] {
				t.Errorf("%s lists threshold %q, which neither its Fires, its Says nor a Defer's When names", r.ID, th.Name)
			}
			if th.Name == "" || strings.TrimSpace(th.Why) == "" || strings.Contains(th.Why, "|") {
				t.Errorf("%s's threshold %q lacks its name or its why, or has a | in its why, which would break the table", r.ID, th.Name)
			}
			if other, ok := names[th.Name]; ok && other != th {
				t.Errorf("two thresholds are named %q", th.Name)
			}
			names[th.Name] = th
		}
	}
	for _, r := range Rules {
		for _, d := range r.DefersTo {
			if !ids[d.To] || d.To == r.ID {
				t.Errorf("%s gives way to %q, which is no other rule", r.ID, d.To)
			}
		}
	}
}
