// Package page renders a summary.View as one HTML page: the live view the exporter
// serves and the report.html the report command writes; and a compare.Comparison as
// compare.html, whose drawing the live page's compare view shares (compare.go). The page
// is self-contained: the charting library is embedded, and the data rides in the page as
// JSON.
//
// Model names, paths and tensor names come from the target's memory and from GGUF files
// anyone can write. They reach the page only as JSON inside a script element, which
// html/template escapes, and the script puts them in the DOM as text, never as markup.
package page

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"os"

	"github.com/profinfer/profinfer/internal/summary"
)

var (
	//go:embed assets/echarts.min.js
	echarts string
	//go:embed page.html
	source string
	//go:embed page.js
	script string
	//go:embed page.css
	style string

	tmpl = template.Must(template.New("page").Parse(source))
)

// Mode is how the page gets its data.
type Mode int

const (
	// Static pages carry their data: report.html.
	Static Mode = iota
	// Live pages fetch /api/view again every few seconds.
	Live
)

// Write renders v as a page.
func Write(w io.Writer, v *summary.View, mode Mode) error {
	// The live page's compare view (comparelive.js) draws as compare.html does.
	css, cmp := style, ""
	if mode == Live {
		css, cmp = style+compareStyle, compareScript+comparelive
	}
	return tmpl.Execute(w, struct {
		View    *summary.View
		Live    bool
		ECharts template.JS
		Compare template.JS
		Script  template.JS
		Style   template.CSS
	}{v, mode == Live, template.JS(echarts), template.JS(cmp), template.JS(script), template.CSS(css)})
}

// WriteFile writes v as a static page, report.html, to path.
func WriteFile(path string, v *summary.View) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, v, Static); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
