package overhead

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// LastSums reads the file exporter's OTLP JSON lines (one batch of resource metrics a line)
// and returns, for each of names found, the value of that sum metric in the last batch that
// has it, added up over the batch's resources and data points. The receiver's counters are
// cumulative, so the last batch, which it flushes at shutdown, holds the totals.
func LastSums(r io.Reader, names ...string) (map[string]int64, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	last := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 256<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", line, err)
		}
		batch := map[string]int64{}
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if !want[m.Name()] || m.Type() != pmetric.MetricTypeSum {
						continue
					}
					for _, dp := range m.Sum().DataPoints().All() {
						v := dp.IntValue()
						if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
							v = int64(dp.DoubleValue())
						}
						batch[m.Name()] += v
					}
				}
			}
		}
		for n, v := range batch {
			last[n] = v
		}
	}
	return last, sc.Err()
}
