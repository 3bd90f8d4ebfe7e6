//go:build e2e

package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/perfetto"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// hostileName is a model's general.name that is markup and script: a GGUF file anyone
// can write.
const hostileName = `<img src=x onerror="document.body.setAttribute('data-pwned','1')"><script>document.body.setAttribute('data-pwned','2')</script>`

// viewConfig is a collector configuration whose traces and metrics go from the receiver
// key, configured by the YAML flow mapping receiver, to the file exporter writing out and
// the profinferview exporter on port.
func viewConfig(key, receiver, out string, port int) string {
	return fmt.Sprintf(`
receivers:
  %s: %s
exporters:
  file: {path: %q}
  profinferview: {endpoint: "127.0.0.1:%d"}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [%[1]s], exporters: [file, profinferview]}
    metrics: {receivers: [%[1]s], exporters: [file, profinferview]}
`, key, receiver, out, port)
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := testbench.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// settle waits until the collector has written no more spans for three seconds: the
// workload is over and its last batches are out, so every consumer of the pipeline has
// seen the same spans. (Metrics go on every collection interval; they are cumulative.)
func settle(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	last, still := -1, 0
	for still < 3 {
		if ctx.Err() != nil {
			t.Fatal("the collector's spans did not settle")
		}
		time.Sleep(time.Second)
		var got batches
		if err := readOutput(path, &got); err != nil && !errors.Is(err, report.ErrCut) {
			continue
		}
		if n := len(got.traces); n == last && n > 0 {
			still++
		} else {
			last, still = n, 0
		}
	}
	// One more collection interval, so that the metrics count every span.
	time.Sleep(1500 * time.Millisecond)
}

// summarize reads the collector's file as the report command does.
func summarize(t *testing.T, path string) *summary.View {
	t.Helper()
	agg := summary.New()
	if err := readOutput(path, report.Summary{Aggregator: agg}); err != nil {
		t.Fatal(err)
	}
	v := agg.Snapshot()
	checkOpRoofs(t, v)
	return v
}

func processOf(t *testing.T, v *summary.View, model string) *summary.Process {
	t.Helper()
	for _, p := range v.Processes {
		if p.Model == model {
			return p
		}
	}
	t.Fatalf("no process with model %q among %d", model, len(v.Processes))
	return nil
}

func getView(t *testing.T, url string) *summary.View {
	t.Helper()
	resp, err := http.Get(url + "api/view")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v summary.View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// opRows are the op table's rows as the page and the terminal show them: op, weight
// type, calls, total ms.
func opRows(ph *summary.Phase) []string {
	var rows []string
	for _, o := range ph.Ops {
		rows = append(rows, fmt.Sprintf("%s|%s|%d|%.2f", o.Op, o.Weight, o.Calls, o.TotalMS))
	}
	return rows
}

// pageCheck loads url in the browser and checks the page: no script error, the hostile
// model name shown as text and inert, and the decode op table equal to want. It returns
// the document as the page's script left it.
func pageCheck(t *testing.T, ctx context.Context, br *testbench.Browser, url string, want []string, shot string) string {
	t.Helper()
	dom, consoleErrors, err := br.DOMShot(ctx, url, testbench.Shot{Path: filepath.Join("../build", shot), Width: 1400, Height: 4200})
	if err != nil {
		t.Fatal(err)
	}
	if len(consoleErrors) > 0 {
		t.Errorf("%s: console errors %q", url, consoleErrors)
	}
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	var pwned, imgs int
	var pageErrors string
	models := map[string]bool{}
	testbench.Walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		if n.Data == "img" {
			imgs++
		}
		for _, a := range n.Attr {
			switch {
			case a.Key == "data-pwned":
				pwned++
			case a.Key == "id" && a.Val == "page-errors":
				pageErrors = testbench.Text(n)
			case a.Key == "class" && a.Val == "model-name":
				models[testbench.Text(n)] = true
			case a.Key == "id" && a.Val == "ops-decode":
				testbench.Walk(n, func(tr *html.Node) {
					if tr.Type != html.ElementNode || tr.Data != "tr" || tr.Parent.Data != "tbody" {
						return
					}
					var cells []string
					for td := tr.FirstChild; td != nil; td = td.NextSibling {
						cells = append(cells, testbench.Text(td))
					}
					rows = append(rows, strings.Join(cells[:4], "|"))
				})
			}
		}
	})
	if pwned > 0 || imgs > 0 {
		t.Errorf("%s: the model name ran or was inserted as markup (%d data-pwned, %d img)", url, pwned, imgs)
	}
	if !models[hostileName] {
		t.Errorf("%s: the hostile model name is not shown as text; shown: %v", url, models)
	}
	if pageErrors != "" {
		t.Errorf("%s: page errors: %s", url, pageErrors)
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: decode op table\n%s\nwant, from the same spans,\n%s", url, strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	return dom
}

// The live view and the report, on a real decode of a MoE model whose name is markup:
// the collector logs the page's URL once; the page loads in Chromium without errors,
// shows the model name as text, and its op table equals the one computed from the same
// spans in the file; the report command prints that table, writes report.html, which
// shows the same, and a trace.json that passes the format's checks.
func TestE2EView(t *testing.T) {
	env := testbench.Require(t)
	br := testbench.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	model := filepath.Join(dir, "hostile.gguf")
	if err := testbench.Rename(env.Model("moe-q4_0"), model, hostileName); err != nil {
		t.Fatal(err)
	}
	bench := env.Bin("llama-bench")
	out := filepath.Join(dir, "out.jsonl")
	port := freePort(t)
	col := runCollector(t, ctx, viewConfig("profinfer",
		fmt.Sprintf("{targets: [{executable: %q}], discovery_interval: 1h, collection_interval: 1s, nodes: {mode: all}}", bench), out, port))
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if n := strings.Count(col.Stderr.String(), "profinfer view at "+url); n != 1 {
		t.Errorf("the view's URL %s logged %d times, want once:\n%s", url, n, col.Stderr.String())
	}
	if _, err := testbench.Run(ctx, bench, "-m", model, "-p", "16", "-n", "16", "-t", "2", "-r", "2", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	settle(t, ctx, out)

	want := processOf(t, summarize(t, out), hostileName)
	live := processOf(t, getView(t, url), hostileName)
	if len(want.Phases) < 2 || len(live.Phases) != len(want.Phases) {
		t.Fatalf("phases: live %d, file %d", len(live.Phases), len(want.Phases))
	}
	var decode *summary.Phase
	for i, ph := range want.Phases {
		if got, w := opRows(live.Phases[i]), opRows(ph); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s op table: live\n%s\nfile\n%s", ph.Name, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
		if ph.Name == "decode" {
			decode = ph
		}
	}
	if decode == nil || len(decode.Ops) == 0 || len(live.MoE) == 0 || live.Timeline == nil || live.Roofs.Source == "" {
		t.Fatalf("the view lacks the decode phase, MoE, the timeline or the roofs: %+v", live)
	}
	if dom := pageCheck(t, ctx, br, url, opRows(decode), "view.png"); !strings.Contains(dom, `id="pause"`) {
		t.Error("the live page has no pause button")
	}

	// The report, from the same file.
	reportDir := filepath.Join(dir, "report")
	cmd := exec.CommandContext(ctx, "go", "run", "../cmd/profinfer", "report", "-o", reportDir, out)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("profinfer report: %v\n%s", err, stdout)
	}
	table := string(stdout)
	for _, o := range decode.Ops {
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%s\s+%s\s+%d\s+%.2f\s`, regexp.QuoteMeta(o.Op), regexp.QuoteMeta(o.Weight), o.Calls, o.TotalMS))
		if !row.MatchString(table) {
			t.Errorf("the terminal table lacks %s %s %d %.2f:\n%s", o.Op, o.Weight, o.Calls, o.TotalMS, table)
		}
	}
	if strings.Contains(table, "\x1b") {
		t.Error("a control character reached the terminal")
	}
	pageCheck(t, ctx, br, "file://"+filepath.Join(reportDir, "report.html"), opRows(decode), "report.png")
	tf, err := os.Open(filepath.Join(reportDir, "trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	if err := perfetto.Check(tf); err != nil {
		t.Errorf("trace.json: %v", err)
	}
}

// An agent's spans and metrics, sent over OTLP to a gateway collector, fill the
// gateway's view as they fill the agent's file: the view consumes pdata, wherever it
// comes from. The gateway's file holds every span and link the agent wrote.
func TestE2EGatewayView(t *testing.T) {
	env := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	otlp, view := freePort(t), freePort(t)
	gatewayOut, agentOut := filepath.Join(dir, "gateway.jsonl"), filepath.Join(dir, "agent.jsonl")
	runCollector(t, ctx, viewConfig("otlp", fmt.Sprintf(`{protocols: {grpc: {endpoint: "127.0.0.1:%d"}}}`, otlp), gatewayOut, view))
	bench := env.Bin("llama-bench")
	runCollector(t, ctx, fmt.Sprintf(`
receivers:
  profinfer: {targets: [{executable: %q}], discovery_interval: 1h, collection_interval: 1s, nodes: {mode: all}}
exporters:
  file: {path: %q}
  otlp_grpc: {endpoint: "127.0.0.1:%d", tls: {insecure: true}}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [profinfer], exporters: [file, otlp_grpc]}
    metrics: {receivers: [profinfer], exporters: [file, otlp_grpc]}
`, bench, agentOut, otlp))
	// A model that takes a moment to load: the agent attaches meanwhile.
	model := env.Model("moe-q4_0")
	if _, err := testbench.Run(ctx, bench, "-m", model, "-p", "16", "-n", "8", "-t", "2", "-r", "1", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	settle(t, ctx, agentOut)
	settle(t, ctx, gatewayOut)

	count := func(path string) (n, links int) {
		traces, _ := (&collector{out: path}).read(t, false)
		for _, s := range spans(traces) {
			n++
			links += len(s.links)
		}
		return n, links
	}
	as, al := count(agentOut)
	gs, gl := count(gatewayOut)
	if as == 0 || as != gs || al != gl {
		t.Errorf("agent wrote %d spans with %d links, the gateway %d with %d", as, al, gs, gl)
	}
	want := summarize(t, agentOut)
	got := getView(t, fmt.Sprintf("http://127.0.0.1:%d/", view))
	if len(want.Processes) != 1 || len(got.Processes) != 1 {
		t.Fatalf("processes: agent %d, gateway %d", len(want.Processes), len(got.Processes))
	}
	w, g := want.Processes[0], got.Processes[0]
	if g.Title != w.Title || len(g.Phases) != len(w.Phases) || !reflect.DeepEqual(g.Roofs, w.Roofs) {
		t.Fatalf("gateway view %s %+v, agent %s %+v", g.Title, g.Roofs, w.Title, w.Roofs)
	}
	// The gateway sums the same node times in the order they came: a total may differ in
	// its last digit.
	for i := range w.Phases {
		a, b := g.Phases[i].Ops, w.Phases[i].Ops
		same := len(a) == len(b) && len(a) > 0
		for j := 0; same && j < len(a); j++ {
			same = a[j].Op == b[j].Op && a[j].Weight == b[j].Weight && a[j].Calls == b[j].Calls && math.Abs(a[j].TotalMS-b[j].TotalMS) < 1e-6*b[j].TotalMS+1e-9
		}
		if !same {
			t.Errorf("%s op table: gateway\n%s\nagent\n%s", w.Phases[i].Name, strings.Join(opRows(g.Phases[i]), "\n"), strings.Join(opRows(w.Phases[i]), "\n"))
		}
	}
}

// The findings on real runs, the scheduler layer's and the barriers' figures on. One
// thread decoding alone on a 2-core machine is not contended, and has no barrier to wait
// at; nor beside a busy loop on the other core. barrier-wait names the wait for the
// slowest thread at its two causes here, each with the finding of its own: two threads
// with a busy loop on one of their two cores (threads-contended), and three threads on
// the two cores (threads-over-cpus). Two threads beside two CPU hogs are contended, and
// the finding says so with its figures.
func TestE2EFindings(t *testing.T) {
	env := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, env.Bin("llama-bench"), "nodes: {mode: all, barriers: true}, layers: {scheduler: true}")
	want := map[string][]string{} // the findings each run's process must have, by its title
	silent := map[string][]string{}
	run := func(what string, threads, hogs int, findings, not []string) {
		for i := range hogs { // a busy loop on CPU 1, then 0
			defer testbench.BusyLoop(t, 1-i).Stop()
		}
		p, err := testbench.Start(env.Bin("llama-bench"), env.BenchArgs("llama-1b-q4_0", 0, 16, threads, 1)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, p.Stderr.String())
		}
		title := fmt.Sprintf("llama-bench (pid %d)", p.PID())
		want[title], silent[title] = append([]string{what}, findings...), not
	}
	run("1 thread alone", 1, 0, nil, []string{"threads-contended", "threads-queued", "barrier-wait"})
	run("1 thread beside a busy loop on the other core", 1, 1, nil, []string{"barrier-wait"})
	run("2 threads, a busy loop on one of their cores", 2, 1, []string{"threads-contended", "barrier-wait"}, nil)
	run("3 threads on 2 cores", 3, 0, []string{"threads-over-cpus", "barrier-wait"}, nil)
	run("2 threads beside two CPU hogs", 2, 2, []string{"threads-contended"}, nil)
	settle(t, ctx, c.out)
	v := summarize(t, c.out)
	advise.Annotate(v)
	if len(v.Processes) != len(want) {
		t.Fatalf("%d processes, want the %d llama-bench runs", len(v.Processes), len(want))
	}
	for _, p := range v.Processes {
		got := map[string]string{}
		for _, f := range p.Findings {
			got[f.ID] = strings.Join(f.Evidence, "; ")
		}
		w, ok := want[p.Title]
		if !ok {
			t.Errorf("%s: not a run of the test's", p.Title)
			continue
		}
		t.Logf("%s: %v", w[0], got)
		for _, id := range w[1:] {
			if got[id] == "" {
				t.Errorf("%s: no %s among %v", w[0], id, slices.Collect(maps.Keys(got)))
			}
		}
		for _, id := range silent[p.Title] {
			if got[id] != "" {
				t.Errorf("%s: %s: %s", w[0], id, got[id])
			}
		}
	}
}
