package signals

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/schema"
)

// Counters names the perf counters whose values the records carry, in their order, and
// classifies nodes by them where the hardware ones are there.
type Counters struct {
	names      []string
	keys       []string // span attribute keys
	classifier perfcount.Classifier
	classify   bool
}

// NewCounters describes cs; nil when there are none.
func NewCounters(cs []perfcount.Counter) *Counters {
	if len(cs) == 0 {
		return nil
	}
	c := &Counters{}
	for _, x := range cs {
		c.names = append(c.names, x.Name)
		c.keys = append(c.keys, schema.PerfPrefix+x.Key())
	}
	c.classifier, c.classify = perfcount.NewClassifier(cs)
	return c
}

// complete says whether every thread share of n had its counters read at both ends.
func complete(n *assemble.Node) bool { return n.Counted > 0 && n.Counted == len(n.Threads) }

// put adds n's counter deltas to a node span, and its counter-based classification.
func (c *Counters) put(a pcommon.Map, n *assemble.Node) {
	if c == nil || !complete(n) {
		return
	}
	for i, k := range c.keys {
		a.PutInt(k, int64(n.Counters[i]))
	}
	if !c.classify {
		return
	}
	if b, ipc, mpki, ok := c.classifier.Classify(n.Counters[:len(c.keys)]); ok {
		a.PutStr(schema.GGMLCountersBound, string(b))
		a.PutDouble(schema.GGMLCountersIPC, ipc)
		a.PutDouble(schema.GGMLCountersLLCMPKI, mpki)
	}
}
