package signals

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
)

// Emit returns every cumulative metric as of now.
func (m *Metrics) Emit(t Telemetry) pmetric.Metrics {
	now := pcommon.NewTimestampFromTime(time.Now())
	for _, pm := range m.procs {
		for k, st := range pm.ops {
			m.mb.RecordGgmlOpCountDataPoint(now, st.count, k.op, k.weight, k.typ)
			m.mb.RecordGgmlOpOffCPUTimeDataPoint(now, float64(st.sched.OffCPU)/1e9, k.op, k.weight, k.typ)
			m.mb.RecordGgmlOpRunqueueTimeDataPoint(now, float64(st.sched.RunQueue)/1e9, k.op, k.weight, k.typ)
			m.mb.RecordGgmlOpPreemptionsDataPoint(now, int64(st.sched.Preemptions), k.op, k.weight, k.typ)
			m.mb.RecordGgmlOpMigrationsDataPoint(now, int64(st.sched.Migrations), k.op, k.weight, k.typ)
			m.mb.RecordGgmlOpBarrierWaitDataPoint(now, float64(st.barrierWait)/1e9, k.op, k.weight, k.typ)
			if st.flops > 0 {
				m.mb.RecordGgmlOpFlopsDataPoint(now, st.flops, k.op, k.weight, k.typ)
				m.mb.RecordGgmlOpBytesDataPoint(now, st.bytes, k.op, k.weight, k.typ)
			}
			if st.counted {
				for i, name := range m.counters.names {
					m.mb.RecordGgmlOpCounterDataPoint(now, int64(st.counters[i]), k.op, k.weight, k.typ, name)
				}
			}
		}
		for k, n := range pm.bounds {
			m.mb.RecordGgmlOpBoundDataPoint(now, n, k.op, k.bound)
		}
		for k, n := range pm.ctrBounds {
			m.mb.RecordGgmlOpCountersBoundDataPoint(now, n, k.op, k.bound)
		}
		for k, c := range pm.threads {
			for i, name := range m.counters.names {
				m.mb.RecordGgmlThreadCounterDataPoint(now, int64(c[i]), int64(k.tid), name, k.scope)
			}
		}
		for layer, c := range pm.moe {
			for e, n := range c {
				m.mb.RecordGgmlMoeExpertSelectionsDataPoint(now, n, int64(layer), int64(e))
			}
			m.mb.RecordGgmlMoeImbalanceDataPoint(now, Imbalance(c), int64(layer))
		}
		for backend, st := range pm.splits {
			m.mb.RecordGgmlBackendSplitCountDataPoint(now, st.count, backend)
			m.mb.RecordGgmlBackendSplitTimeDataPoint(now, float64(st.ns)/1e9, backend)
		}
		for backend, dv := range pm.devices {
			m.mb.RecordGgmlBackendDeviceTimeDataPoint(now, float64(dv.ns)/1e9, backend)
			m.mb.RecordGgmlBackendDeviceWaitDataPoint(now, float64(dv.wait)/1e9, backend)
		}
		for k, ns := range pm.deviceOps {
			m.mb.RecordGgmlBackendDeviceOpTimeDataPoint(now, float64(ns)/1e9, k.backend, k.op)
		}
		for k, st := range pm.copies {
			m.mb.RecordGgmlBackendCopyBytesDataPoint(now, st.bytes, k.src, k.dst)
			m.mb.RecordGgmlBackendCopyTimeDataPoint(now, float64(st.ns)/1e9, k.src, k.dst)
		}
		for phase, st := range pm.steps {
			m.mb.RecordGgmlStepCountDataPoint(now, st.count, phase)
			m.mb.RecordGgmlStepTimeDataPoint(now, float64(st.ns)/1e9, phase)
		}
		if j := pm.jobs; j.count > 0 {
			m.mb.RecordWhisperTranscriptionCountDataPoint(now, j.count)
			m.mb.RecordWhisperAudioTimeDataPoint(now, j.audio)
			m.mb.RecordWhisperTranscriptionTimeDataPoint(now, j.time)
		}
		m.recordRoofs(now)
		if q := pm.quota; q.Period > 0 {
			m.mb.RecordProfinferCgroupCPULimitDataPoint(now, q.CPUs(), q.Cgroup)
			m.mb.RecordProfinferCgroupCPUPeriodsDataPoint(now, int64(q.Periods), q.Cgroup)
			m.mb.RecordProfinferCgroupCPUThrottledPeriodsDataPoint(now, int64(q.Throttled), q.Cgroup)
			m.mb.RecordProfinferCgroupCPUThrottledTimeDataPoint(now, q.ThrottledTime.Seconds(), q.Cgroup)
		}
		if c := pm.cpus; c.Allowed > 0 {
			m.mb.RecordProfinferProcessCpusDataPoint(now, int64(c.Allowed), metadata.AttributeProfinferCpusKindAllowed)
			m.mb.RecordProfinferProcessCpusDataPoint(now, int64(c.Cores), metadata.AttributeProfinferCpusKindCores)
			if c.Performance > 0 {
				m.mb.RecordProfinferProcessCpusDataPoint(now, int64(c.Performance), metadata.AttributeProfinferCpusKindPerformance)
			}
		}
		if pm.cpusTime > 0 {
			m.mb.RecordProfinferProcessCpusTimeDataPoint(now, pm.idleTime, metadata.AttributeProfinferCpusTimeOfIdle)
			m.mb.RecordProfinferProcessCpusTimeDataPoint(now, pm.cpusTime, metadata.AttributeProfinferCpusTimeOfAll)
			if !pm.ownLost && pm.ownTime > 0 {
				m.mb.RecordProfinferProcessCpusTimeDataPoint(now, pm.ownTime, metadata.AttributeProfinferCpusTimeOfProcess)
			}
		}
		if pm.windowed {
			m.mb.RecordProfinferWindowNextDataPoint(now, pm.window)
		}
		for ph, name := range phaseNames {
			if ph < len(pm.tokens) {
				m.mb.RecordLlamaDecodeTokensDataPoint(now, pm.tokens[ph], name)
			}
			if pm.graphThreads[ph] > 0 {
				m.mb.RecordGgmlGraphThreadsCPUTimeDataPoint(now, pm.graphCPU[ph]/1e9, name)
				m.mb.RecordGgmlGraphThreadsTimeDataPoint(now, pm.graphThreads[ph]/1e9, name)
			}
		}
		if pm.kvCells > 0 {
			m.mb.RecordLlamaKvCellsDataPoint(now, pm.kvCells)
		}
		if pm.duration.count > 0 {
			m.mb.RecordLlamaRequestsContextFullDataPoint(now, pm.contextFull[0], metadata.AttributeLlamaContextOutcomeTruncated)
			m.mb.RecordLlamaRequestsContextFullDataPoint(now, pm.contextFull[1], metadata.AttributeLlamaContextOutcomeShifted)
			for i, n := range pm.reqTokens {
				m.mb.RecordLlamaRequestTokensDataPoint(now, n, tokenTypes[i], genAIOperation, genAIProvider, pm.proc.ModelName())
			}
		}
		m.mb.EmitForResource(metadata.WithResource(pm.proc.Resource(m.mb.NewResourceBuilder())))
	}
	m.mb.RecordProfinferEventsReceivedDataPoint(now, int64(t.EventsReceived))
	m.mb.RecordProfinferEventsDroppedDataPoint(now, int64(t.EventsDropped))
	m.mb.RecordProfinferGraphsDroppedDataPoint(now, int64(t.GraphsDropped))
	m.mb.RecordProfinferSpansDroppedDataPoint(now, int64(t.SpansDropped))
	m.mb.RecordProfinferGraphsTracedDataPoint(now, int64(t.GraphsTraced))
	for r := metadata.AttributeProfinferAttachReasonNoNodeProbe; r <= metadata.AttributeProfinferAttachReasonOther; r++ {
		m.mb.RecordProfinferAttachFailuresDataPoint(now, int64(t.AttachFailures[r]), r)
	}
	m.mb.RecordProfinferProbesAttachedDataPoint(now, int64(t.ProbesAttached))
	md := m.mb.Emit()
	// Histograms are beyond mdatagen: add them to each process's scope by hand.
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		pid, ok := rm.Resource().Attributes().Get(schema.ResourceProcessPID)
		if !ok {
			continue
		}
		pm := m.procs[int(pid.Int())]
		if pm == nil || rm.ScopeMetrics().Len() == 0 {
			continue
		}
		m.histograms(rm.ScopeMetrics().At(0).Metrics(), pm, now)
	}
	for pid, pm := range m.procs {
		if pm.exited {
			delete(m.procs, pid)
		}
	}
	return md
}

// recordRoofs records the roofs the process's nodes are classified under, so that a view
// downstream (a gateway's, a report's) shows the same roofs as the verdicts.
func (m *Metrics) recordRoofs(now pcommon.Timestamp) {
	if !m.roofs.Known() {
		return
	}
	at := ""
	if m.roofs.Source != roofline.SourceConfigured && !m.roofs.At.IsZero() {
		at = m.roofs.At.UTC().Format(time.RFC3339)
	}
	m.mb.RecordProfinferRooflinePeakDataPoint(now, m.roofs.FLOPS, metadata.AttributeGgmlRooflineRoofFlops, m.roofs.Source, at)
	m.mb.RecordProfinferRooflinePeakDataPoint(now, m.roofs.Bandwidth, metadata.AttributeGgmlRooflineRoofBandwidth, m.roofs.Source, at)
	if m.roofs.Int8 > 0 {
		m.mb.RecordProfinferRooflinePeakDataPoint(now, m.roofs.Int8, metadata.AttributeGgmlRooflineRoofInt8, m.roofs.Source, at)
	}
	if m.roofs.BF16 > 0 {
		m.mb.RecordProfinferRooflinePeakDataPoint(now, m.roofs.BF16, metadata.AttributeGgmlRooflineRoofBf16, m.roofs.Source, at)
	}
	for _, l := range m.roofs.Levels {
		m.mb.RecordProfinferRooflineCacheBandwidthDataPoint(now, l.Bandwidth, l.Name, l.Size, m.roofs.Source, at)
	}
}
