//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/testbench"
)

// An exporter that never answers (an OTLP endpoint that accepts requests and hangs, with
// no sending queue, so the collector's pipeline blocks profinfer's hand-off) holds up
// nothing else: the ring buffer is still read (no records dropped), sampling windows still
// open and close, the spans that find the pipeline busy are dropped and counted, metrics
// keep flowing through their own pipeline, and the collector still stops.
func TestE2EExporterDown(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var requests atomic.Int64
	hang := make(chan struct{})
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer sink.Close()
	defer close(hang)
	otlp := fmt.Sprintf("endpoint: %q, timeout: 10m, sending_queue: {enabled: false}, retry_on_failure: {enabled: false}", sink.URL)
	c := startCollectorTo(t, ctx, []string{e.Bin("llama-bench")},
		"nodes: {mode: sampled, sample_interval: 100ms, sample_graphs: 3}", otlp)
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 16, 256, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	stopping := time.Now()
	_, metrics := c.stop(t)
	if took := time.Since(stopping); took > 4*time.Second {
		t.Errorf("the collector took %s to stop with its exporter hanging", took)
	}
	dropped, _ := lastSum(metrics, "profinfer.spans.dropped")
	lost, _ := lastSum(metrics, "profinfer.events.dropped")
	traced, _ := lastSum(metrics, "profinfer.graphs.traced")
	tokens := maxPoint(metrics, "llama.decode.tokens")
	t.Logf("%d requests hung at the exporter; %d spans dropped, %d records lost, %d graphs traced, %d decode tokens",
		requests.Load(), dropped, lost, traced, tokens)
	if requests.Load() == 0 {
		t.Fatal("the exporter never got a request: the test proves nothing")
	}
	if dropped == 0 {
		t.Error("profinfer.spans.dropped = 0 with the pipeline blocked")
	}
	if lost != 0 {
		t.Errorf("profinfer.events.dropped = %d: the ring buffer was not read while the pipeline hung", lost)
	}
	// Windows of 3 graphs, 100 ms apart, over a run of several seconds: many windows, and
	// far from every graph (about a third here; a window left open until the reader's
	// tick traces some 50 graphs).
	if traced < 10 || traced > tokens*6/10 {
		t.Errorf("profinfer.graphs.traced = %d of %d decode tokens, want the windows to go on opening and closing (10 to 60%%)", traced, tokens)
	}
	// And they go on to the end of the run, long after the pipeline stuck (its first
	// request, then the queued batches: a few seconds in).
	before, last := int64(-1), int64(-1)
	eachMetric(metrics, "profinfer.graphs.traced", func(m pmetric.Metric) {
		dp := m.Sum().DataPoints().At(0)
		switch at := dp.Timestamp().AsTime(); {
		case at.Before(ended.Add(-2 * time.Second)):
			before = dp.IntValue()
		case at.Before(ended.Add(time.Second)):
			last = dp.IntValue()
		}
	})
	if before < 0 || last <= before {
		t.Errorf("profinfer.graphs.traced went from %d to %d over the last 2 s of the run: sampling stalled behind the pipeline", before, last)
	}
}
