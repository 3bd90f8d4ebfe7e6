package viewexporter

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/compare"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/viewexporter/internal/metadata"
)

// The pair the page's tests compare: llama-bench -t 1 (pid 361) and -t 2 (pid 527) on the
// 1B Q4_0 model, as the file exporter wrote them.
const (
	t1 = "../internal/page/testdata/t1.jsonl.gz"
	t2 = "../internal/page/testdata/t2.jsonl.gz"
)

// batches is a recording's export batches, in order.
type batches struct {
	traces  []ptrace.Traces
	metrics []pmetric.Metrics
	order   []bool // true: the next traces batch; false: the next metrics batch
}

func (b *batches) Traces(td ptrace.Traces) error {
	b.traces, b.order = append(b.traces, td), append(b.order, true)
	return nil
}

func (b *batches) Metrics(md pmetric.Metrics) error {
	b.metrics, b.order = append(b.metrics, md), append(b.order, false)
	return nil
}

func read(t testing.TB, path string, sinks ...report.Sink) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := report.Read(z, path, sinks...); err != nil {
		t.Fatal(err)
	}
}

// pipeline feeds a view as its pipelines do.
type pipeline struct{ v *view }

func (c pipeline) Traces(td ptrace.Traces) error { return c.v.ConsumeTraces(context.Background(), td) }
func (c pipeline) Metrics(md pmetric.Metrics) error {
	return c.v.ConsumeMetrics(context.Background(), md)
}

func testView(t testing.TB) (*view, *httptest.Server) {
	v := newView(exportertest.NewNopSettings(metadata.Type), createDefaultConfig(), func() {})
	srv := httptest.NewServer(v.routes())
	t.Cleanup(srv.Close)
	return v, srv
}

// get decodes the JSON at srv's path into out, and returns the status.
func get(t testing.TB, srv *httptest.Server, path string, out any) int {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode
}

// mark posts a mark of process id, with the page's header or without, and returns the
// status.
func mark(t testing.TB, srv *httptest.Server, id string, header bool) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/mark?id="+url.QueryEscape(id), nil)
	if err != nil {
		t.Fatal(err)
	}
	if header {
		req.Header.Set("X-Profinfer-Mark", "1")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// ids returns the view's process ids by pid.
func ids(t testing.TB, srv *httptest.Server) map[string]string {
	t.Helper()
	var v summary.View
	get(t, srv, "/api/view", &v)
	out := map[string]string{}
	for _, p := range v.Processes {
		for _, kv := range p.Resource {
			if kv.Key == schema.ResourceProcessPID {
				out[kv.Value] = p.ID
			}
		}
	}
	return out
}

// Two processes the view saw, compared live, give what `profinfer compare` gives over
// the files they were written to.
func TestCompareTwoProcesses(t *testing.T) {
	v, srv := testView(t)
	read(t, t1, pipeline{v})
	read(t, t2, pipeline{v})
	id := ids(t, srv)
	var listed struct{ Sides []sideInfo }
	get(t, srv, "/api/sides", &listed)
	if len(listed.Sides) != 2 || id["361"] == "" || id["527"] == "" {
		t.Fatalf("sides %+v, the view's processes %q", listed, id)
	}
	for _, s := range listed.Sides {
		if s.ID != id["361"] && s.ID != id["527"] || !s.Mark.IsZero() {
			t.Errorf("side %+v is no process of the view's, or marked", s)
		}
	}
	var live compare.Comparison
	if status := get(t, srv, "/api/compare?"+url.Values{"a": {id["361"]}, "b": {id["527"]}}.Encode(), &live); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	if live.A.Processes[0] != "llama-bench (pid 361)" || live.B.Processes[0] != "llama-bench (pid 527)" || live.A.Name != "A" || live.B.Name != "B" {
		t.Errorf("sides %+v, %+v", live.A, live.B)
	}
	for _, ph := range live.Phases {
		if ph.Verdict != "faster" || !ph.Beyond || ph.Rows[0].Op != "MUL_MAT" || ph.Rows[0].WeightA != "q4_0" || !ph.Rows[0].Beyond {
			t.Errorf("%s: %s (beyond noise %v), largest row %+v", ph.Phase, ph.Verdict, ph.Beyond, ph.Rows[0])
		}
	}

	a, b := compare.NewSide("A", compare.Selection{Spec: t1}), compare.NewSide("B", compare.Selection{Spec: t2})
	read(t, t1, a)
	read(t, t2, b)
	files, err := compare.Diff(a, b, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live.Phases, files.Phases) || !reflect.DeepEqual(live.Setup, files.Setup) || len(live.Warnings) != len(files.Warnings) {
		t.Errorf("live and from files differ:\n%+v\n%+v", live.Phases, files.Phases)
	}
}

// A mark splits a process's run: the side before it keeps what came before, and a side
// of its own takes the steps from then on.
func TestCompareMark(t *testing.T) {
	v, srv := testView(t)
	id, at := markedRun(t, v, srv)
	var listed struct{ Sides []sideInfo }
	get(t, srv, "/api/sides", &listed)
	if len(listed.Sides) != 1 || !listed.Sides[0].Mark.Equal(at) {
		t.Errorf("sides %+v, want a mark at %v", listed.Sides, at)
	}
	var c compare.Comparison
	if code := get(t, srv, "/api/compare?"+url.Values{"a": {id}, "a_part": {"before"}, "b": {id}}.Encode(), &c); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if !strings.HasPrefix(c.A.Selection.Spec, "before the mark at ") || !strings.HasPrefix(c.B.Selection.Spec, "since the mark at ") {
		t.Errorf("sides %q and %q", c.A.Selection.Spec, c.B.Selection.Spec)
	}
	steps := map[string][2]int64{}
	for _, ph := range c.Phases {
		steps[ph.Phase] = [2]int64{ph.A.Steps, ph.B.Steps}
	}
	if steps["prefill"] != [2]int64{6, 0} || steps["decode"] != [2]int64{50, 111} || c.Phases[0].Verdict != "only in A" {
		t.Errorf("steps before and since the mark %v, prefill %q", steps, c.Phases[0].Verdict)
	}
}

// markedRun feeds v t1 (one process) around a mark after its prefills and 50 decodes,
// checking the mark's errors on the way, and returns the process's id and the mark.
func markedRun(t testing.TB, v *view, srv *httptest.Server) (string, time.Time) {
	t.Helper()
	var bs batches
	read(t, t1, &bs)
	var last time.Time
	feed := func(order []bool) {
		for _, tr := range order {
			if tr {
				last = latest(bs.traces[0], last)
				v.ConsumeTraces(context.Background(), bs.traces[0])
				bs.traces = bs.traces[1:]
			} else {
				v.ConsumeMetrics(context.Background(), bs.metrics[0])
				bs.metrics = bs.metrics[1:]
			}
		}
	}
	feed(bs.order[:6])
	at := last.Add(time.Nanosecond)
	v.sides.now = func() time.Time { return at }
	id := ids(t, srv)["361"]
	var e struct{ Error string }
	if code := get(t, srv, "/api/compare?"+url.Values{"a": {id}, "a_part": {"before"}, "b": {id}}.Encode(), &e); code != http.StatusNotFound || !strings.Contains(e.Error, "no mark") {
		t.Errorf("before a mark: %d %q", code, e.Error)
	}
	if code := mark(t, srv, id, false); code != http.StatusForbidden {
		t.Errorf("a mark without its header: %d", code)
	}
	if code := mark(t, srv, id, true); code != http.StatusOK {
		t.Fatalf("mark: %d", code)
	}
	feed(bs.order[6:])
	return id, at
}

func latest(td ptrace.Traces, t time.Time) time.Time {
	for i := range td.ResourceSpans().Len() {
		sss := td.ResourceSpans().At(i).ScopeSpans()
		for j := range sss.Len() {
			for k := range sss.At(j).Spans().Len() {
				if e := sss.At(j).Spans().At(k).EndTimestamp().AsTime(); e.After(t) {
					t = e
				}
			}
		}
	}
	return t
}

func TestCompareErrors(t *testing.T) {
	v, srv := testView(t)
	read(t, t1, pipeline{v})
	read(t, t2, pipeline{v})
	id, other := ids(t, srv)["361"], ids(t, srv)["527"]
	for _, tc := range []struct {
		query url.Values
		code  int
		want  string
	}{
		{url.Values{"a": {id}}, http.StatusBadRequest, "name two processes"},
		{url.Values{"a": {id}, "b": {"nobody"}}, http.StatusNotFound, "side B: no such process"},
		{url.Values{"a": {id}, "b": {id}}, http.StatusBadRequest, "the same side"},
		{url.Values{"a": {id}, "b": {id}, "b_part": {"after"}}, http.StatusNotFound, `part "after"`},
		{url.Values{"a": {id}, "b": {other}, "phase": {"encode"}}, http.StatusUnprocessableEntity, "neither side computed the encode phase"},
	} {
		var e struct{ Error string }
		if code := get(t, srv, "/api/compare?"+tc.query.Encode(), &e); code != tc.code || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%v: %d %q, want %d %q", tc.query, code, e.Error, tc.code, tc.want)
		}
	}
	if code := mark(t, srv, "nobody", true); code != http.StatusNotFound {
		t.Errorf("marking no process: %d", code)
	}
}

// The sides stay within maxSides, the least recently seen process's going first, and go
// with the processes the summary forgets.
func TestSidesBounded(t *testing.T) {
	s := newSides()
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	feed := func(pid int) string {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt(schema.ResourceProcessPID, int64(pid))
		rs.Resource().Attributes().PutStr(schema.ResourceHostName, "h")
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(schema.SpanDecode)
		if err := s.traces(td, now.Add(-forgetAfter)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
		id, _ := processID(rs.Resource().Attributes())
		return id
	}
	var first []string
	for pid := 1; pid <= maxSides+4; pid++ {
		first = append(first, feed(pid))
	}
	if len(s.procs) != maxSides || s.procs[first[0]] != nil || s.procs[first[len(first)-1]] == nil {
		t.Fatalf("%d processes kept, the oldest %v, the newest %v", len(s.procs), s.procs[first[0]] != nil, s.procs[first[len(first)-1]] != nil)
	}
	for _, id := range first[len(first)-4:] {
		if _, ok := s.markProcess(id); !ok {
			t.Fatal("no process to mark")
		}
	}
	if len(s.procs) != maxSides-4 {
		t.Errorf("%d processes kept with 4 marked, want %d", len(s.procs), maxSides-4)
	}
	now = now.Add(forgetAfter)
	feed(1000)
	if len(s.procs) != 1 {
		t.Errorf("%d processes kept an hour after they were last seen", len(s.procs))
	}
	if s.process(pcommon.NewMap()) != nil {
		t.Error("a resource without a pid, the receiver's own, got a side")
	}
}
