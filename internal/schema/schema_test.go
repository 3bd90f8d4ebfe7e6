package schema

import (
	"cmp"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/metadata"
)

var update = flag.Bool("update", false, "rewrite docs/schema.md")

const docPath = "../../docs/schema.md"

// sources are the package's files, in the order the document follows: spans, their
// attributes, then the rest.
func sources(t *testing.T) []string {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	first := []string{"schema.go", "attributes.go"}
	rank := func(f string) int {
		if i := slices.Index(first, f); i >= 0 {
			return i
		}
		return len(first)
	}
	slices.SortStableFunc(files, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	return files
}

// constant is one constant of the package, as its source declares it.
type constant struct {
	name, value, file string
	group             string // its const block's doc comment
	doc               string // its own, on one line
}

// constants reads the package's constants in source order: spans, attributes, then the
// rest, each file in declaration order.
func constants(t *testing.T) []constant {
	t.Helper()
	fset := token.NewFileSet()
	var out []constant
	values := map[string]string{}
	for _, file := range sources(t) {
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				c := constant{name: vs.Names[0].Name, file: file, group: oneLine(g.Doc.Text()), doc: oneLine(vs.Doc.Text())}
				switch v := vs.Values[0].(type) {
				case *ast.BasicLit:
					c.value, _ = strconv.Unquote(v.Value)
				case *ast.Ident: // an alias of a constant declared before it
					c.value = values[v.Name]
				}
				if c.value == "" {
					t.Fatalf("%s: no string value", c.name)
				}
				values[c.name] = c.value
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no constants")
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// form is a constant's comment: Name (a; b): text, or Name: text.
var form = regexp.MustCompile(`^(\w+)(?: \(([^;()]+); ([^()]+)\))?: (.+)$`)

var types = []string{"string", "int", "double", "bool", "int[]", "string[]"}

var link = regexp.MustCompile(`\[(\w+)\]`)

// TestSchemaDoc renders docs/schema.md from the constants' comments and fails where it
// differs; -update rewrites it.
func TestSchemaDoc(t *testing.T) {
	cs := constants(t)
	values := map[string]string{}
	for _, c := range cs {
		values[c.name] = c.value
	}
	// md replaces [Name] with the constant's value.
	md := func(s string) string {
		return link.ReplaceAllStringFunc(s, func(l string) string {
			v, ok := values[l[1:len(l)-1]]
			if !ok {
				t.Errorf("%q: no constant %s", s, l)
			}
			return "`" + v + "`"
		})
	}
	var spans, events, attrs, hists, read strings.Builder
	lastGroup, spanGroup := "", ""
	for _, c := range cs {
		m := form.FindStringSubmatch(c.doc)
		if m == nil || m[1] != c.name {
			t.Errorf("%s: comment %q is not %q", c.name, c.doc, c.name+" (type; spans): meaning")
			continue
		}
		key, a, b, text := "`"+c.value+"`", m[2], m[3], md(m[4])
		switch {
		case strings.HasPrefix(c.name, "Span"):
			when, parent, ok := strings.Cut(text, " Parent: ")
			if !ok || a != "" {
				t.Errorf("%s: no Parent, or a type", c.name)
			}
			spans.WriteString("| " + key + " | " + when + " | " + parent + " |\n")
			spanGroup = md(strings.TrimPrefix(c.group, "Span names. "))
		case strings.HasPrefix(c.name, "Event"):
			when, on, ok := strings.Cut(text, ", on ")
			if !ok || a != "" {
				t.Errorf("%s: no span it is on, or a type", c.name)
			}
			events.WriteString("| " + key + " | " + when + " | " + strings.TrimSuffix(on, ".") + " |\n")
		case c.file == "attributes.go":
			if !slices.Contains(types, a) {
				t.Errorf("%s: type %q is none of %v", c.name, a, types)
			}
			if c.group != lastGroup {
				attrs.WriteString("| **" + md(strings.TrimSuffix(c.group, ".")) + "** | | | |\n")
				lastGroup = c.group
			}
			if strings.HasSuffix(c.value, ".") {
				key = "`" + c.value + "*`"
			}
			attrs.WriteString("| " + key + " | " + a + " | " + md(b) + " | " + text + " |\n")
		case strings.HasPrefix(c.name, "Histogram"):
			hists.WriteString("| " + key + " | " + a + " | " + md(b) + " | " + text + " |\n")
		default:
			if a != "" {
				t.Errorf("%s: a type", c.name)
			}
			read.WriteString("| " + key + " | " + text + " |\n")
		}
	}
	doc := `# Span schema

<!-- Generated from internal/schema by go test ./internal/schema -update; do not edit. -->

Every span profinfer emits, and every span attribute. Spans are in the resource of their
process, and metrics likewise: the resource attributes and the metrics mdatagen builds are
in [documentation.md](../documentation.md), generated from metadata.yaml.

## Spans

` + spanGroup + `

| Span | Emitted | Parent |
|---|---|---|
` + spans.String() + `
| Event | Emitted | On |
|---|---|---|
` + events.String() + `
## Span attributes

| Key | Type | On | Meaning |
|---|---|---|---|
` + attrs.String() + `
## Histograms

mdatagen cannot build histograms: these are built next to the metrics it builds.

| Metric | Unit | Attributes | Meaning |
|---|---|---|---|
` + hists.String() + `
## Keys readers look up

Resource attributes and metric attributes that metadata.yaml defines, named in
internal/schema for the code that reads them back (the summary, the Perfetto writer).

| Key | Meaning |
|---|---|
` + read.String()
	if *update {
		if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(docPath)
	if err != nil || string(old) != doc {
		t.Errorf("%s is not what internal/schema says (%v): go test ./internal/schema -update", docPath, err)
	}
}

// TestSpelledOnce checks that no two constants spell the same name: an alias says so.
func TestSpelledOnce(t *testing.T) {
	seen := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range sources(t) {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
				if other, dup := seen[l.Value]; dup {
					t.Errorf("%s spelled twice, in %s and %s", l.Value, other, file)
				}
				seen[l.Value] = file
			}
			return true
		})
	}
}

// TestGenerated checks the keys readers look up against what the generated metadata
// package writes.
func TestGenerated(t *testing.T) {
	rc := metadata.DefaultResourceAttributesConfig()
	fields := reflect.ValueOf(&rc).Elem()
	for i := 0; i < fields.NumField(); i++ {
		fields.Field(i).FieldByName("Enabled").SetBool(true)
	}
	rb := metadata.NewResourceBuilder(rc)
	rb.SetProcessPid(1)
	rb.SetProcessExecutableName("x")
	rb.SetProcessExecutablePath("x")
	rb.SetServiceName("x")
	rb.SetGgmlRuntime("x")
	rb.SetGgmlBackendsLoaded([]any{"x"})
	rb.SetLlamaModelName("x")
	rb.SetLlamaModelPath("x")
	rb.SetWhisperModelType("x")
	rb.SetWhisperModelFileType("x")
	rb.SetGgmlDeviceSoftware("x")
	rb.SetGgmlVersion("x")
	rb.SetGgmlCPUVariant("x")
	rb.SetGgmlCPUSimd("x")
	rb.SetHostCPUSimd("x")
	rb.SetProcessExecutableBuildIDGnu("x")
	rb.SetContainerID("x")
	rb.SetOsVersion("x")
	rb.SetLlamaBuildNumber(1)
	rb.SetLlamaBuildCommit("x")
	rb.SetLlamaContextSize(1)
	rb.SetLlamaContextThreads(1)
	rb.SetLlamaContextBatchSize(1)
	rb.SetLlamaContextUbatchSize(1)
	rb.SetLlamaModelArchitecture("x")
	rb.SetLlamaModelParameters(1)
	rb.SetLlamaModelFileType("x")
	res := rb.Emit().Attributes()
	for _, k := range []string{ResourceProcessPID, ResourceProcessExecutableName, ResourceProcessExecutablePath,
		ResourceServiceName, ResourceGGMLRuntime, ResourceGGMLBackendsLoaded, ResourceLlamaModelName,
		ResourceLlamaModelPath, ResourceWhisperModelType, ResourceWhisperModelFileType, ResourceGGMLDeviceSoftware,
		ResourceGGMLVersion, ResourceGGMLCPUVariant, ResourceGGMLCPUSIMD, ResourceHostCPUSIMD, ResourceProcessExecutableBuildID, ResourceContainerID, ResourceOSVersion,
		ResourceLlamaBuildNumber, ResourceLlamaBuildCommit, ResourceLlamaContextSize, ResourceLlamaContextThreads,
		ResourceLlamaContextBatchSize, ResourceLlamaContextUbatchSize, ResourceLlamaModelArchitecture,
		ResourceLlamaModelParameters, ResourceLlamaModelFileType} {
		if _, ok := res.Get(k); !ok {
			t.Errorf("the ResourceBuilder writes no %s", k)
		}
	}

	cfg := metadata.DefaultMetricsBuilderConfig()
	cfg.Metrics.ProfinferRooflinePeak.Enabled = true
	cfg.Metrics.GgmlMoeExpertSelections.Enabled = true
	cfg.Metrics.ProfinferCgroupCPULimit.Enabled = true
	mb := metadata.NewMetricsBuilder(cfg, receivertest.NewNopSettings(metadata.Type))
	now := pcommon.NewTimestampFromTime(time.Now())
	mb.RecordProfinferRooflinePeakDataPoint(now, 1, metadata.AttributeGgmlRooflineRoofFlops, "x", "x")
	mb.RecordProfinferRooflineCacheBandwidthDataPoint(now, 1, "L1", 1, "x", "x")
	mb.RecordGgmlMoeExpertSelectionsDataPoint(now, 1, 1, 1)
	mb.RecordProfinferCgroupCPULimitDataPoint(now, 1, "x")
	md := mb.Emit()
	keys := map[string]bool{}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		var dps pmetric.NumberDataPointSlice
		switch ms.At(i).Type() {
		case pmetric.MetricTypeGauge:
			dps = ms.At(i).Gauge().DataPoints()
		case pmetric.MetricTypeSum:
			dps = ms.At(i).Sum().DataPoints()
		}
		for j := 0; j < dps.Len(); j++ {
			for k := range dps.At(j).Attributes().All() {
				keys[k] = true
			}
		}
	}
	for _, k := range []string{GGMLRooflineRoof, ProfinferRooflineSource, ProfinferRooflineMeasured, GGMLMoEExpert,
		GGMLLayer, ProfinferCgroupPath, ProfinferRooflineCacheLevel, ProfinferRooflineCacheSize} {
		if !keys[k] {
			t.Errorf("the MetricsBuilder writes no %s (it writes %v)", k, keys)
		}
	}
}
