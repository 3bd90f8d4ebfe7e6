package signals

import (
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/schema"
)

// Bucket bounds in seconds: operators take microseconds to milliseconds, decodes
// milliseconds to seconds.
var (
	opBounds     = []float64{1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1}
	decodeBounds = []float64{1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1, 2, 5, 10}
	// The GenAI semantic conventions' recommended buckets (v1.38.0).
	ttftBounds     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tpotBounds     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	durationBounds = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// Batch occupancy: sequences and tokens per decode.
	seqBounds   = []float64{1, 2, 4, 8, 16, 32}
	tokenBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}
)

type histogram struct {
	count  uint64
	sum    float64
	counts []uint64
	bounds []float64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) add(v float64) {
	h.count++
	h.sum += v
	h.counts[sort.SearchFloat64s(h.bounds, v)]++
}

func (h *histogram) put(dp pmetric.HistogramDataPoint) {
	dp.SetCount(h.count)
	dp.SetSum(h.sum)
	dp.ExplicitBounds().FromRaw(h.bounds)
	dp.BucketCounts().FromRaw(h.counts)
}

func (m *Metrics) histograms(ms pmetric.MetricSlice, pm *processMetrics, now pcommon.Timestamp) {
	op := newHistogramMetric(ms, schema.HistogramOpDuration, "Duration of computed graph nodes, from the first thread's start to the last thread's end.", "s")
	for k, st := range pm.ops {
		h := st.dur
		dp := op.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(m.start)
		dp.SetTimestamp(now)
		dp.Attributes().PutStr(schema.GGMLOp, k.op)
		dp.Attributes().PutStr(schema.GGMLWeightType, k.weight)
		dp.Attributes().PutStr(schema.GGMLTensorType, k.typ)
		h.put(dp)
	}
	dec := newHistogramMetric(ms, schema.HistogramDecodeDuration, "Duration of llama_decode calls.", "s")
	point := func(h *histogram, phase string, width int) {
		if h == nil || h.count == 0 {
			return
		}
		dp := dec.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(m.start)
		dp.SetTimestamp(now)
		dp.Attributes().PutStr(schema.LlamaPhase, phase)
		if width >= 0 {
			dp.Attributes().PutStr(schema.LlamaBatchWidth, schema.Widths[width].Name)
		}
		h.put(dp)
	}
	point(pm.prefillDur, phaseNames[prefillPhase].String(), -1)
	for w, h := range pm.decodeDur {
		point(h, phaseNames[decodePhase].String(), w)
	}
	point(pm.mixedDur, phaseNames[mixedPhase].String(), -1)
	m.requestMetrics(ms, pm, now)
}

// requestMetrics adds the request layer's metrics: the GenAI server histograms and token
// counter, with the conventions' attributes, and batch occupancy.
func (m *Metrics) requestMetrics(ms pmetric.MetricSlice, pm *processMetrics, now pcommon.Timestamp) {
	genAI := func(dp pmetric.HistogramDataPoint, h *histogram) {
		dp.SetStartTimestamp(m.start)
		dp.SetTimestamp(now)
		putGenAI(dp.Attributes(), &pm.proc)
		h.put(dp)
	}
	if pm.duration.count > 0 {
		genAI(newHistogramMetric(ms, schema.HistogramRequestDuration,
			"Time from a request's first decode to its last, as the engine computed it.", "s").DataPoints().AppendEmpty(), pm.duration)
		genAI(newHistogramMetric(ms, schema.HistogramTimeToFirstToken,
			"Time from a request's first decode to the end of the decode that computed its first output token.", "s").DataPoints().AppendEmpty(), pm.ttft)
		genAI(newHistogramMetric(ms, schema.HistogramTimePerOutputToken,
			"Mean time per output token after the first, per request.", "s").DataPoints().AppendEmpty(), pm.tpot)
	}
	if pm.batchSeqs.count > 0 {
		for _, b := range []struct {
			name, desc, unit string
			h                *histogram
		}{
			{schema.HistogramBatchSequences, "Sequences per llama_decode batch.", "{sequence}", pm.batchSeqs},
			{schema.HistogramBatchTokens, "Tokens per llama_decode batch.", "{token}", pm.batchToks},
		} {
			dp := newHistogramMetric(ms, b.name, b.desc, b.unit).DataPoints().AppendEmpty()
			dp.SetStartTimestamp(m.start)
			dp.SetTimestamp(now)
			b.h.put(dp)
		}
	}
}

func newHistogramMetric(ms pmetric.MetricSlice, name, desc, unit string) pmetric.Histogram {
	mt := ms.AppendEmpty()
	mt.SetName(name)
	mt.SetDescription(desc)
	mt.SetUnit(unit)
	h := mt.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	return h
}
