package advise

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the rules' table in docs/findings.md")

const (
	docPath  = "../../docs/findings.md"
	tableTop = "<!-- Rendered from internal/advise's Rules by go test ./internal/advise -update; do not edit. -->\n"
	tableEnd = "<!-- End of the rendered table. -->\n"
)

// table renders the rules as docs/findings.md's table, one rule a row, in the order their
// findings are listed.
func table() string {
	var b strings.Builder
	b.WriteString(tableTop)
	b.WriteString("| finding (id) | fires when | says |\n|---|---|---|\n")
	for _, r := range Rules {
		b.WriteString("| " + r.Name + " (`" + r.ID + "`) | " + r.Fires + " | " + r.Says + " |\n")
	}
	b.WriteString(tableEnd)
	return b.String()
}

// TestFindingsDoc holds docs/findings.md's table of rules to the rules themselves; -update
// rewrites it.
func TestFindingsDoc(t *testing.T) {
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	top, end := strings.Index(doc, tableTop), strings.Index(doc, tableEnd)
	if top < 0 || end < top {
		t.Fatalf("%s has no rendered table between %q and %q", docPath, tableTop, tableEnd)
	}
	want := doc[:top] + table() + doc[end+len(tableEnd):]
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Errorf("%s's table is not what internal/advise's Rules say: go test ./internal/advise -update", docPath)
	}
	for _, r := range Rules {
		if r.ID == "" || r.Name == "" || r.Fires == "" || r.Says == "" || r.apply == nil {
			t.Errorf("rule %q lacks its id, name, when it fires, what it says or its function", r.ID)
		}
	}
}
