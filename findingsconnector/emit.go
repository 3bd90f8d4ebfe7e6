package findingsconnector // import "github.com/profinfer/profinfer/findingsconnector"

import (
	"cmp"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/profinfer/profinfer/findingsconnector/internal/metadata"
	"github.com/profinfer/profinfer/internal/summary"
)

// What the connector emits, as metadata.yaml declares it and documentation.md lists it;
// the metrics' points are the generated MetricsBuilder's.
const (
	MetricFinding     = "profinfer.finding"
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

// points records a process's findings in mb, on its resource: 1 for each it has, and 0
// for each it no longer has (gone: their severities by id).
func points(mb *metadata.MetricsBuilder, res pcommon.Resource, fs []summary.Finding, gone map[string]string, ts pcommon.Timestamp) {
	if len(fs)+len(gone) == 0 {
		return
	}
	for id, severity := range gone {
		mb.RecordProfinferFindingDataPoint(ts, 0, id, metadata.MapAttributeProfinferFindingSeverity[severity])
	}
	for _, f := range fs {
		mb.RecordProfinferFindingDataPoint(ts, 1, f.ID, metadata.MapAttributeProfinferFindingSeverity[string(f.Severity)])
		if g := f.Gain; g != nil {
			mb.RecordProfinferFindingGainDataPoint(ts, (g.From-g.To)/1e3, f.ID, g.Phase, metadata.MapAttributeProfinferFindingGainPer[gainPer(g)])
		}
	}
	mb.EmitForResource(metadata.WithResource(res))
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
