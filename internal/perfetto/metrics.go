package perfetto

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/metadata"
)

// charted are the metrics drawn as counters: cumulative sums and gauges that say how
// much was decoded and whether profinfer kept up. Per-op series would be too many tracks.
var charted = map[string]bool{
	metadata.MetricsInfo.LlamaDecodeTokens.Name:       true,
	metadata.MetricsInfo.ProfinferEventsReceived.Name: true,
	metadata.MetricsInfo.ProfinferEventsDropped.Name:  true,
	metadata.MetricsInfo.ProfinferGraphsDropped.Name:  true,
	metadata.MetricsInfo.ProfinferGraphsTraced.Name:   true,
	metadata.MetricsInfo.ProfinferSpansDropped.Name:   true,
	metadata.MetricsInfo.ProfinferProbesAttached.Name: true,
}

// Metrics appends a counter event per data point of the charted metrics in md, on its
// resource's process, a series per attribute set. Other metrics are skipped.
func (w *Writer) Metrics(md pmetric.Metrics) error {
	if w.closed {
		return errClosed
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		var p *proc
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if !charted[m.Name()] {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
					continue
				}
				if p == nil {
					p = w.process(rm.Resource())
				}
				for d := 0; d < dps.Len(); d++ {
					dp := dps.At(d)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					var series []string
					dp.Attributes().Range(func(_ string, a pcommon.Value) bool {
						series = append(series, a.AsString())
						return true
					})
					key := strings.Join(series, " ")
					if key == "" {
						key = "value"
					}
					w.counter(p.pid, m.Name(), w.rel(dp.Timestamp()), key, v)
				}
			}
		}
	}
	w.flush()
	return w.err
}
