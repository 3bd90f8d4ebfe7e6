package findingsconnector

import (
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/findingsconnector/internal/metadata"
	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// recorded is a real full-tracing run of llama-bench on the 1B Q4_0 model, under load:
// its threads lacked the CPU and waited at barriers.
const recorded = "../testdata/otlp/llama-1b-full.jsonl.gz"

// feed hands the recording to every connector, as the collector hands each pipeline's
// data to each connector of its kind, then a profinfer.process.cpus point of one CPU for
// its process: more threads than CPUs.
func feed(t *testing.T, traces []connector.Traces, metrics []connector.Metrics) pcommon.Resource {
	t.Helper()
	f, err := os.Open(recorded)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	s := &fan{traces: traces, metrics: metrics, res: pcommon.NewResource()}
	if _, err := report.Read(z, recorded, s); err != nil {
		t.Fatal(err)
	}
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	s.res.CopyTo(rm.Resource())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	plantCPUs(m)
	if err := s.Metrics(md); err != nil {
		t.Fatal(err)
	}
	return s.res
}

// plantCPUs makes m a profinfer.process.cpus point of one CPU, one core.
func plantCPUs(m pmetric.Metric) {
	m.SetName("profinfer.process.cpus")
	dps := m.SetEmptyGauge().DataPoints()
	for _, kind := range []string{"allowed", "cores"} {
		dp := dps.AppendEmpty()
		dp.SetIntValue(1)
		dp.Attributes().PutStr(schema.ProfinferCPUsKind, kind)
	}
}

type fan struct {
	traces  []connector.Traces
	metrics []connector.Metrics
	res     pcommon.Resource // the traced process's
}

func (f *fan) Traces(td ptrace.Traces) error {
	for _, c := range f.traces {
		if err := c.ConsumeTraces(context.Background(), td); err != nil {
			return err
		}
	}
	return nil
}

func (f *fan) Metrics(md pmetric.Metrics) error {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		if r := md.ResourceMetrics().At(i).Resource(); r.Attributes().Len() > 0 {
			if _, ok := r.Attributes().Get(schema.ResourceProcessPID); ok {
				r.CopyTo(f.res)
			}
		}
	}
	for _, c := range f.metrics {
		if err := c.ConsumeMetrics(context.Background(), md); err != nil {
			return err
		}
	}
	return nil
}

// Through the collector's four connectors of one entry: the recording folded once, its
// findings judged as the report judges them, sent as points and log records on the
// process's resource, each once.
func TestFindingsOut(t *testing.T) {
	ctx := context.Background()
	fact := NewFactory()
	cfg := fact.CreateDefaultConfig()
	set := connectortest.NewNopSettings(metadata.Type)
	var pointsIn, pointsOfTraces consumertest.MetricsSink
	var logsIn, logsOfTraces consumertest.LogsSink
	tm, err := fact.CreateTracesToMetrics(ctx, set, cfg, &pointsOfTraces)
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := fact.CreateTracesToLogs(ctx, set, cfg, &logsOfTraces)
	mm, _ := fact.CreateMetricsToMetrics(ctx, set, cfg, &pointsIn)
	ml, _ := fact.CreateMetricsToLogs(ctx, set, cfg, &logsIn)
	for _, c := range []connector.Traces{tm, tl} {
		if err := c.Start(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	res := feed(t, []connector.Traces{tm, tl}, []connector.Metrics{mm, ml})

	// What the report says of the same data, with the same point.
	agg := summary.New()
	fresh := func() {
		f, _ := os.Open(recorded)
		defer f.Close()
		z, _ := gzip.NewReader(f)
		if _, err := report.Read(z, recorded, report.Summary{Aggregator: agg}); err != nil {
			t.Fatal(err)
		}
	}
	fresh()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res.CopyTo(rm.Resource())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	plantCPUs(m)
	agg.Metrics(md)
	v := agg.Snapshot()
	advise.Annotate(v)
	want := v.Processes[0].Findings
	if len(want) == 0 || want[0].ID != "threads-over-cpus" {
		t.Fatalf("the report's findings %v, want threads-over-cpus first", want)
	}

	if err := getJudge(set, cfg.(*Config)).emit(ctx); err != nil { // the ticker's
		t.Fatal(err)
	}
	for _, c := range []connector.Traces{tm, tl} {
		if err := c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(pointsOfTraces.AllMetrics())+len(logsOfTraces.AllLogs()) != 0 {
		t.Error("the connectors that take traces in sent findings, beside those that take metrics")
	}
	got := map[string]string{}
	for _, md := range pointsIn.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			if !rm.Resource().Attributes().Equal(res.Attributes()) {
				t.Errorf("points on resource %v, want the process's", rm.Resource().Attributes().AsRaw())
			}
			ms := rm.ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				if ms.At(j).Name() != MetricFinding {
					continue
				}
				dps := ms.At(j).Gauge().DataPoints()
				for k := 0; k < dps.Len(); k++ {
					id, _ := dps.At(k).Attributes().Get(AttrID)
					sev, _ := dps.At(k).Attributes().Get(AttrSeverity)
					got[id.Str()] = sev.Str()
				}
			}
		}
	}
	for _, f := range want {
		if got[f.ID] != string(f.Severity) {
			t.Errorf("no %s point of severity %s: %v", f.ID, f.Severity, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("points %v, want the report's %d findings", got, len(want))
	}
	// A log record each, with what the report says: the same evidence, so the
	// recording was folded once, not once per connector.
	var lrs []plog.LogRecord
	for _, ld := range logsIn.AllLogs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			sl := ld.ResourceLogs().At(i).ScopeLogs().At(0)
			for j := 0; j < sl.LogRecords().Len(); j++ {
				lrs = append(lrs, sl.LogRecords().At(j))
			}
		}
	}
	if len(lrs) != len(want) {
		t.Fatalf("%d log records, want %d", len(lrs), len(want))
	}
	for i, f := range want {
		lr := lrs[i]
		ev, _ := lr.Attributes().Get(AttrEvidence)
		var evidence []string
		for _, e := range ev.Slice().AsRaw() {
			evidence = append(evidence, e.(string))
		}
		if lr.Body().Str() != f.Title || lr.EventName() != EventFinding || !slices.Equal(evidence, f.Evidence) {
			t.Errorf("log record %q %q %q, want %q with %q", lr.EventName(), lr.Body().Str(), evidence, f.Title, f.Evidence)
		}
		if want := plog.SeverityNumberWarn; f.Severity == "warning" && lr.SeverityNumber() != want {
			t.Errorf("%s: severity %v, want %v", f.ID, lr.SeverityNumber(), want)
		}
	}
	if !strings.Contains(lrs[0].Body().Str(), "on 1 CPU:") {
		t.Errorf("first record %q, want the threads against the one CPU", lrs[0].Body().Str())
	}
}

// A finding's log record is sent when it appears or changes, not at every interval;
// its point at every interval.
func TestRecordsOnce(t *testing.T) {
	ctx := context.Background()
	var points consumertest.MetricsSink
	var logs consumertest.LogsSink
	j := newJudge(connectortest.NewNopSettings(metadata.Type), createDefaultConfig(), func() {})
	mm := j.input(metricsIn, out{metrics: &points})
	ml := j.input(metricsIn, out{logs: &logs})
	tm := j.input(tracesIn, out{metrics: &points})
	feed(t, []connector.Traces{tm}, []connector.Metrics{mm, ml})
	for range 3 {
		if err := j.emit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.LogRecordCount(); n == 0 || n != len(j.said) {
		t.Errorf("%d log records over 3 intervals, want one a finding (%d)", n, len(j.said))
	}
	if len(points.AllMetrics()) != 3 {
		t.Errorf("%d batches of points over 3 intervals, want 3", len(points.AllMetrics()))
	}
	// The event turned off in the config: the points alone.
	cfg := createDefaultConfig()
	cfg.Events.ProfinferFinding.Enabled = false
	points.Reset()
	logs.Reset()
	j = newJudge(connectortest.NewNopSettings(metadata.Type), cfg, func() {})
	mm = j.input(metricsIn, out{metrics: &points})
	ml = j.input(metricsIn, out{logs: &logs})
	tm = j.input(tracesIn, out{metrics: &points})
	feed(t, []connector.Traces{tm}, []connector.Metrics{mm, ml})
	if err := j.emit(ctx); err != nil {
		t.Fatal(err)
	}
	if logs.LogRecordCount() != 0 || len(points.AllMetrics()) != 1 {
		t.Errorf("with the event off: %d log records, %d batches of points", logs.LogRecordCount(), len(points.AllMetrics()))
	}
}

// A finding a process no longer has goes to 0 once, with its severity; another
// process's, or one it still has, does not.
func TestResolved(t *testing.T) {
	was := map[string]string{"p1\x00threads-contended": "warning\x00t", "p1\x00cpu-quota": "warning\x00q", "p2\x00oom-killed": "warning\x00o"}
	is := map[string]string{"p1\x00cpu-quota": "warning\x00q", "p1\x00threads-over-cpus": "warning\x00o"}
	gone := resolved("p1", was, is)
	if len(gone) != 1 || gone["threads-contended"] != "warning" {
		t.Fatalf("resolved %v, want threads-contended", gone)
	}
	mb := newBuilder(metadata.DefaultMetricsBuilderConfig())
	points(mb, pcommon.NewResource(), []summary.Finding{{ID: "cpu-quota", Severity: "warning"}}, gone, 0)
	md := mb.Emit()
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints()
	values := map[string]int64{}
	for i := 0; i < dps.Len(); i++ {
		id, _ := dps.At(i).Attributes().Get(AttrID)
		values[id.Str()] = dps.At(i).IntValue()
	}
	if len(values) != 2 || values["cpu-quota"] != 1 || values["threads-contended"] != 0 {
		t.Errorf("points %v, want cpu-quota 1 and threads-contended 0", values)
	}
}

// A gain a token and a gain a request are apart, each series in one unit.
func TestGainPer(t *testing.T) {
	fs := []summary.Finding{
		{ID: "threads-few", Severity: "warning", Gain: &summary.Gain{Phase: "decode", From: 32, To: 16}},
		{ID: "requests-queued", Severity: "warning", Gain: &summary.Gain{Phase: "time to first token", Per: summary.PerRequest, From: 1500, To: 300}},
	}
	mb := newBuilder(metadata.DefaultMetricsBuilderConfig())
	points(mb, pcommon.NewResource(), fs, nil, 0)
	ms := mb.Emit().ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	got := map[string]string{}
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Name() != MetricFindingGain {
			continue
		}
		dps := ms.At(i).Gauge().DataPoints()
		for j := 0; j < dps.Len(); j++ {
			id, _ := dps.At(j).Attributes().Get(AttrID)
			per, _ := dps.At(j).Attributes().Get(AttrGainPer)
			got[id.Str()] = fmt.Sprintf("%s %.3f", per.Str(), dps.At(j).DoubleValue())
		}
	}
	if got["threads-few"] != "token 0.016" || got["requests-queued"] != "request 1.200" {
		t.Errorf("gains %v, want a token's 16 ms and a request's 1.2 s apart", got)
	}
	// The gain's metric turned off in the config: the findings' points alone.
	cfg := metadata.DefaultMetricsBuilderConfig()
	cfg.Metrics.ProfinferFindingGain.Enabled = false
	mb = newBuilder(cfg)
	points(mb, pcommon.NewResource(), fs, nil, 0)
	ms = mb.Emit().ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	if ms.Len() != 1 || ms.At(0).Name() != MetricFinding || ms.At(0).Gauge().DataPoints().Len() != 2 {
		t.Errorf("with profinfer.finding.gain off: %d metrics, the first %s", ms.Len(), ms.At(0).Name())
	}
}

func newBuilder(cfg metadata.MetricsBuilderConfig) *metadata.MetricsBuilder {
	return metadata.NewMetricsBuilder(cfg, connectortest.NewNopSettings(metadata.Type))
}
