package page

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"os"

	"github.com/profinfer/profinfer/internal/compare"
)

var (
	//go:embed compare.html
	compareSource string
	//go:embed compare.js
	compareScript string
	//go:embed compare.css
	compareStyle string
	//go:embed comparelive.js
	comparelive string

	compareTmpl = template.Must(template.New("compare").Parse(compareSource))
)

// WriteCompare renders c as compare.html: the comparison alone, its data in the page as
// report.html's is, drawn without the charting library (its bars are SVG), so the file
// stays small and opens offline.
func WriteCompare(w io.Writer, c *compare.Comparison) error {
	return compareTmpl.Execute(w, struct {
		Comparison *compare.Comparison
		Script     template.JS
		Style      template.CSS
	}{c, template.JS(compareScript), template.CSS(style + compareStyle)})
}

// WriteCompareFile writes c as compare.html to path.
func WriteCompareFile(path string, c *compare.Comparison) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteCompare(f, c); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
