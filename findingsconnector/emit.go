package findingsconnector // import "github.com/profinfer/profinfer/findingsconnector"

import (
	"cmp"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/findingsconnector/internal/metadata"
	"github.com/profinfer/profinfer/internal/summary"
)

// What the connector emits: docs/findings.md documents it.
const (
	// MetricFinding is 1 for each finding a process has, by id and severity, and 0 once
	// for one it no longer has.
	MetricFinding = "profinfer.finding"
	// MetricFindingGain is the time a finding's cause costs, where estimated: a token's
	// (AttrGainPer token) or a request's (request), one unit a series.
	MetricFindingGain = "profinfer.finding.gain"
	// EventFinding names the log record of a finding that appeared or changed.
	EventFinding = "profinfer.finding"

	AttrID       = "profinfer.finding.id"
	AttrSeverity = "profinfer.finding.severity"
	AttrPhase    = "profinfer.finding.phase"
	AttrGainPer  = "profinfer.finding.gain.per"
	AttrAdvice   = "profinfer.finding.advice"
	AttrEvidence = "profinfer.finding.evidence"
)

// points adds a process's findings to md, on its resource: 1 for each it has, and 0 for
// each it no longer has (gone: their severities by id).
func points(md pmetric.Metrics, res pcommon.Resource, fs []summary.Finding, gone map[string]string, ts pcommon.Timestamp) {
	if len(fs)+len(gone) == 0 {
		return
	}
	rm := md.ResourceMetrics().AppendEmpty()
	res.CopyTo(rm.Resource())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	m := sm.Metrics().AppendEmpty()
	m.SetName(MetricFinding)
	m.SetUnit("{finding}")
	m.SetDescription("1 for each finding the process has, by its id and severity (warning or info), and 0 once for one it no longer has: docs/findings.md lists them.")
	found := m.SetEmptyGauge().DataPoints()
	for id, severity := range gone {
		dp := found.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(0)
		dp.Attributes().PutStr(AttrID, id)
		dp.Attributes().PutStr(AttrSeverity, severity)
	}
	var gains pmetric.NumberDataPointSlice
	for _, f := range fs {
		dp := found.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(1)
		dp.Attributes().PutStr(AttrID, f.ID)
		dp.Attributes().PutStr(AttrSeverity, string(f.Severity))
		if g := f.Gain; g != nil {
			if gains == (pmetric.NumberDataPointSlice{}) {
				m := sm.Metrics().AppendEmpty()
				m.SetName(MetricFindingGain)
				m.SetUnit("s")
				m.SetDescription("The time the finding's cause costs, as estimated, a token of its phase or a request (profinfer.finding.gain.per: token or request), one unit a series (the finding's evidence says what the estimate assumes).")
				gains = m.SetEmptyGauge().DataPoints()
			}
			dp := gains.AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue((g.From - g.To) / 1e3)
			dp.Attributes().PutStr(AttrID, f.ID)
			dp.Attributes().PutStr(AttrPhase, g.Phase)
			dp.Attributes().PutStr(AttrGainPer, gainPer(g))
		}
	}
}

// gainPer is what a gain's time is of: a token of its phase, or a request.
func gainPer(g *summary.Gain) string { return cmp.Or(g.Per, "token") }

// records adds to ld a log record for each of p's findings that is new or says something
// else than before (was), and notes what each says now (is).
func records(ld plog.Logs, res pcommon.Resource, p *summary.Process, was, is map[string]string, ts pcommon.Timestamp) {
	var lrs plog.LogRecordSlice
	for _, f := range p.Findings {
		key, text := p.ID+"\x00"+f.ID, string(f.Severity)+"\x00"+f.Title
		is[key] = text
		if was[key] == text {
			continue
		}
		if lrs == (plog.LogRecordSlice{}) {
			rl := ld.ResourceLogs().AppendEmpty()
			res.CopyTo(rl.Resource())
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(metadata.ScopeName)
			lrs = sl.LogRecords()
		}
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(ts)
		lr.SetObservedTimestamp(ts)
		lr.SetEventName(EventFinding)
		lr.SetSeverityText(string(f.Severity))
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		if f.Severity == summary.Warning {
			lr.SetSeverityNumber(plog.SeverityNumberWarn)
		}
		lr.Body().SetStr(f.Title)
		a := lr.Attributes()
		a.PutStr(AttrID, f.ID)
		a.PutStr(AttrSeverity, string(f.Severity))
		a.PutStr(AttrAdvice, f.Advice)
		ev := a.PutEmptySlice(AttrEvidence)
		for _, e := range f.Evidence {
			ev.AppendEmpty().SetStr(e)
		}
		if g := f.Gain; g != nil {
			a.PutStr(AttrPhase, g.Phase)
			a.PutStr(AttrGainPer, gainPer(g))
		}
	}
}
