package summary

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// phaseMemo remembers the phase and tokens of the newest traces' decodes, so that a
// graph or node exported in a later batch than its decode still lands in its phase.
// Oldest entries go first, so it stays at its size.
type phaseMemo struct {
	byTrace map[pcommon.TraceID]memo
	ring    []pcommon.TraceID
	next    int
}

type memo struct {
	phase      string
	tokens     int64
	start, end int64 // unix ns: the decode's; its end its device work's where that ended later
}

func newPhaseMemo(n int) *phaseMemo {
	return &phaseMemo{byTrace: make(map[pcommon.TraceID]memo, n), ring: make([]pcommon.TraceID, 0, n)}
}

func (m *phaseMemo) put(id pcommon.TraceID, phase string, tokens, start, end int64) {
	if _, ok := m.byTrace[id]; !ok {
		if len(m.ring) < cap(m.ring) {
			m.ring = append(m.ring, id)
		} else {
			delete(m.byTrace, m.ring[m.next])
			m.ring[m.next] = id
			m.next = (m.next + 1) % len(m.ring)
		}
	}
	m.byTrace[id] = memo{phase, tokens, start, end}
}

// extend moves the end of trace id's decode to end, where that is later (its device's
// work outlasted it), and returns its phase and its time before and after, in seconds;
// was == now where it did not move.
func (m *phaseMemo) extend(id pcommon.TraceID, end int64) (phase string, was, now float64) {
	e, ok := m.byTrace[id]
	if !ok || end <= e.end {
		return "", 0, 0
	}
	was = float64(e.end-e.start) / 1e9
	e.end = end
	m.byTrace[id] = e
	return e.phase, was, float64(e.end-e.start) / 1e9
}

// get returns the phase of trace id's decode; graphs with none ran outside a decode.
func (m *phaseMemo) get(id pcommon.TraceID) (string, int64) {
	if e, ok := m.byTrace[id]; ok {
		return e.phase, e.tokens
	}
	return outside, 0
}

// logHistogram keeps durations in buckets 5% wide from 10 µs to about 1000 s: quantiles
// within 2.5% in bounded memory, however many decodes it sees.
type logHistogram struct {
	counts []int64
	total  int64
	max    float64
}

const (
	histMin    = 10e-6
	histGrowth = 1.05
	histBucket = 380 // histMin·1.05^380 ≈ 1.1e3 s
)

func newLogHistogram() *logHistogram { return &logHistogram{counts: make([]int64, histBucket+1)} }

func (h *logHistogram) add(secs float64) {
	h.counts[bucket(secs)]++
	h.total++
	h.max = max(h.max, secs)
}

// move moves a duration added as was to now: a decode found to last longer.
func (h *logHistogram) move(was, now float64) {
	if i := bucket(was); h.counts[i] > 0 {
		h.counts[i]--
		h.total--
	}
	h.add(now)
}

func bucket(secs float64) int {
	if secs <= histMin {
		return 0
	}
	return min(int(math.Log(secs/histMin)/math.Log(histGrowth))+1, histBucket)
}

// quantile returns the upper bound of the bucket holding quantile q, in seconds.
func (h *logHistogram) quantile(q float64) float64 {
	rank := int64(math.Ceil(q * float64(h.total)))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank && c > 0 {
			return min(histMin*math.Pow(histGrowth, float64(i)), h.max)
		}
	}
	return h.max
}

func (h *logHistogram) quantiles() Quantiles {
	if h.total == 0 {
		return Quantiles{}
	}
	return Quantiles{Count: h.total, P50: 1e3 * h.quantile(0.5), P90: 1e3 * h.quantile(0.9),
		P99: 1e3 * h.quantile(0.99), Max: 1e3 * h.max}
}
