//go:build e2e

package receiver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// The Grafana dashboard in deploy/grafana against a real Prometheus scraping the
// collector's Prometheus exporter: every panel query and every template variable query
// returns data from a real workload, so a panel naming a metric or label the exporter
// does not produce fails here. The workload is llama-server on tiny-moe (MoE routing,
// both phases) offloading its last layers to ggml-rpc-server, since the backend split
// and copy series exist only with a second backend, then whisper.cpp's addon transcribing
// (its transcriptions and steps).
func TestE2EDashboard(t *testing.T) {
	e := testbench.Require(t)
	e.RequireFugood(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		testbench.Missing(t, "the prometheus binary (Debian package prometheus)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	dash := readDashboard(t, "../deploy/grafana/profinfer.json")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	c, exporter := startPromCollector(t, ctx, []string{e.Bin("llama-server"), e.Bin("ggml-rpc-server"), node})
	prom := startPrometheus(t, ctx, promBin, exporter)
	began := time.Now()

	started := time.Now()
	rpc, err := e.StartRPCServer(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rpc.Stop()
	waitLogged(t, c, "attached", rpc.PID(), started, 30*time.Second)
	// llama.cpp counts the output layer among -ngl's: the last half of the blocks and
	// the output go to the RPC server, and their inputs are copied there.
	blocks, _, _ := modelShape(t, e.Model("tiny-moe"))
	started = time.Now()
	srv, err := e.StartServer(ctx, e.Bin("llama-server"), "tiny-moe", 2,
		"--rpc", rpc.Addr, "-ngl", strconv.FormatInt(blocks/2+1, 10))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitLogged(t, c, "attached", srv.PID(), started, 30*time.Second)
	// A first completion, and the wait for Prometheus to have its series: a series' first
	// sample is its rates' baseline, so the work counted in it would show as no rate.
	if _, err := srv.Complete(ctx, "Once upon a time", 4); err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf(`llama_decode_duration_seconds_count{process_pid="%d", llama_phase="decode"}`, srv.PID())
	for {
		var res struct{ Result []any }
		if err := promGet(prom+"/api/v1/query", url.Values{"query": {first}}, &res); err == nil && len(res.Result) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Prometheus never had %s", first)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Completions over a few seconds, so that the 1 s scrapes see the counters grow.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		if _, err := srv.Complete(ctx, "Once upon a time", 16); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Transcriptions, some 0.4 s each, begun once the addon is attached: over five
	// seconds the scrapes see their counters grow too.
	gate := filepath.Join(t.TempDir(), "go")
	name, args := testbench.Whisper{Model: "whisper-micro", Runs: 12, Threads: 2, Gate: gate}.Command(e, node)
	whisper, err := testbench.Start(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer whisper.Stop()
	openGate(t, c, whisper.PID(), gate) // env execs node
	if err := whisper.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// The last collection (1 s) and scrape (1 s) must land, later on a loaded machine;
	// poll rather than sleep, and report the failures of the last attempt.
	var failures, results []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		time.Sleep(time.Second)
		failures, results = checkDashboard(prom, dash, time.Now(), began)
		if len(failures) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, r := range results {
		t.Log(r)
	}
	for _, f := range failures {
		t.Error(f)
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name     string          `json:"name"`
			Type     string          `json:"type"`
			Query    json.RawMessage `json:"query"` // a string, or {query, refId}
			AllValue string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title      string     `json:"title"`
	Type       string     `json:"type"`
	Datasource datasource `json:"datasource"`
	Panels     []panel    `json:"panels"` // a collapsed row's
	Targets    []struct {
		Expr       string     `json:"expr"`
		Legend     string     `json:"legendFormat"`
		Datasource datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one PromQL expression of the dashboard, its template variables not yet replaced.
type query struct {
	where, expr string
	legend      []string // labels the legend format names
	label       string   // for a label_values variable: the label whose values it lists
}

func readDashboard(t *testing.T, path string) []query {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var qs []query
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q.Query); err != nil {
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
		}
		m := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`).FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
		}
		// Panels replace it by the values of "All": it must have a regex that matches them.
		if v.AllValue == "" {
			t.Errorf("variable %s has no allValue", v.Name)
		}
		qs = append(qs, query{where: "variable " + v.Name, expr: m[1], label: m[2]})
	}
	if !vars["datasource"] {
		t.Error("no datasource variable")
	}
	legend := regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
				t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no targets", p.Title)
			}
			for i, tg := range p.Targets {
				if tg.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q target %d: datasource %+v", p.Title, i, tg.Datasource)
				}
				q := query{where: fmt.Sprintf("panel %q target %d", p.Title, i), expr: tg.Expr}
				for _, m := range legend.FindAllStringSubmatch(tg.Legend, -1) {
					q.legend = append(q.legend, m[1])
				}
				qs = append(qs, q)
			}
		}
	}
	walk(d.Panels)
	if len(qs) == 0 {
		t.Fatal("no queries in the dashboard")
	}
	// Grafana's built-in intervals, with values that cover the workload: it ran within
	// the minute before the queries.
	subst := map[string]string{"__rate_interval": "1m", "__interval": "15s", "__range": "5m", "__range_s": "300"}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			subst[v.Name] = v.AllValue
		}
	}
	ref := regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)
	for i := range qs {
		qs[i].expr = ref.ReplaceAllStringFunc(qs[i].expr, func(s string) string {
			m := ref.FindStringSubmatch(s)
			name := m[1] + m[2] + m[3]
			v, ok := subst[name]
			if !ok {
				t.Errorf("%s: unknown variable %s in %s", qs[i].where, s, qs[i].expr)
			}
			return v
		})
	}
	return qs
}

// checkDashboard runs every query at time at and returns what is wrong: a query that
// fails, returns nothing, returns no finite value, or whose series lack a label its
// legend shows. A label_values variable is asked for its label's values since since.
// It also returns a line on each query's result.
func checkDashboard(prom string, qs []query, at, since time.Time) (failures, results []string) {
	for _, q := range qs {
		if q.label != "" {
			var values []string
			err := promGet(prom+"/api/v1/label/"+q.label+"/values", url.Values{"match[]": {q.expr},
				"start": {unix(since)}, "end": {unix(at)}}, &values)
			switch {
			case err != nil:
				failures = append(failures, fmt.Sprintf("%s: %s: %v", q.where, q.expr, err))
			case len(values) == 0:
				failures = append(failures, fmt.Sprintf("%s: no %s values for %s", q.where, q.label, q.expr))
			}
			results = append(results, fmt.Sprintf("%s: %s values %v", q.where, q.label, values))
			continue
		}
		var res struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		if err := promGet(prom+"/api/v1/query", url.Values{"query": {q.expr}, "time": {unix(at)}}, &res); err != nil {
			failures = append(failures, fmt.Sprintf("%s: %s: %v", q.where, q.expr, err))
			continue
		}
		finite := 0
		labels := map[string]bool{}
		for _, r := range res.Result {
			s, _ := r.Value[1].(string)
			if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
				finite++
			}
			for k, v := range r.Metric {
				labels[k] = labels[k] || v != ""
			}
		}
		var missing []string
		for _, l := range q.legend {
			if !labels[l] {
				missing = append(missing, l)
			}
		}
		if res.ResultType != "vector" || len(res.Result) == 0 {
			failures = append(failures, fmt.Sprintf("%s: no series (%s) for %s", q.where, res.ResultType, q.expr))
			continue
		}
		if finite == 0 {
			failures = append(failures, fmt.Sprintf("%s: %d series, none with a finite value, for %s", q.where, len(res.Result), q.expr))
		}
		if len(missing) > 0 {
			failures = append(failures, fmt.Sprintf("%s: its legend shows %v, which no series has, for %s", q.where, missing, q.expr))
		}
		results = append(results, fmt.Sprintf("%s: %d series (%d finite); first %v", q.where, len(res.Result), finite, res.Result[:min(1, len(res.Result))]))
	}
	return failures, results
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64) }

// promGet calls Prometheus' HTTP API and decodes the data of a successful answer into data.
func promGet(u string, params url.Values, data any) error {
	resp, err := http.Get(u + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: %w", resp.Status, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", resp.Status, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// startPromCollector runs the ocb-built collector with the profinfer receiver tracing
// every node of exes and the Prometheus exporter set up as the dashboard's README asks,
// and returns it with the exporter's address.
func startPromCollector(t *testing.T, ctx context.Context, exes []string) (*collector, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The dashboard reads metrics only; the findings connector reads the traces too.
	p := runCollector(t, ctx, fmt.Sprintf(`
receivers:
  profinfer: {targets: [%s], discovery_interval: 1h, collection_interval: 1s, %s}
connectors:
  profinferfindings: {interval: 1s}
exporters:
  prometheus:
    endpoint: %q
    resource_constant_labels: {included: ["*"]}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces: {receivers: [profinfer], exporters: [profinferfindings]}
    metrics: {receivers: [profinfer], exporters: [prometheus, profinferfindings]}
    metrics/findings: {receivers: [profinferfindings], exporters: [prometheus]}
`, executables(exes), fullTracing, addr))
	return &collector{proc: p}, addr
}

// startPrometheus runs its own Prometheus, scraping target every second into a temporary
// directory, and returns its URL once it has scraped target.
func startPrometheus(t *testing.T, ctx context.Context, bin, target string) string {
	t.Helper()
	port, err := testbench.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: profinfer
    static_configs: [{targets: [%q]}]
`, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := testbench.Start(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	for {
		var res struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		}
		if err := promGet(u+"/api/v1/query", url.Values{"query": {`up{job="profinfer"}`}}, &res); err == nil &&
			len(res.Result) == 1 && res.Result[0].Value[1] == "1" {
			return u
		}
		if p.Exited() || ctx.Err() != nil {
			t.Fatalf("prometheus did not scrape the collector: %s", p.Stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
