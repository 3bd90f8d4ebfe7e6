//go:build e2e

package receiver

import (
	"context"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/gguf"
	"github.com/profinfer/profinfer/internal/testbench"
)

// MoE routing read from the ids of MUL_MAT_ID nodes, on llama-server: in every MoE layer
// the selections add up exactly to the tokens it routed (in traced graphs) times the
// experts used per token, and each MUL_MAT_ID span carries its tokens' experts.
func TestE2EMoE(t *testing.T) {
	e := testbench.Require(t)
	for _, model := range []string{"tiny-moe", "moe-q4_0"} {
		t.Run(model, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			layers, used, experts := modelShape(t, e.Model(model))
			c := startCollector(t, ctx, e.Bin("llama-server"), "nodes: {mode: all}")
			started := time.Now()
			srv, err := e.StartServer(ctx, e.Bin("llama-server"), model, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			waitLogged(t, c, "attached", srv.PID(), started, 30*time.Second)
			if _, err := srv.Complete(ctx, "Once upon a time", 8); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
			traces, metrics := c.stop(t)

			checkMoE(t, traces, metrics, layers, used, experts)
		})
	}
}

// checkMoE checks a MoE model's routing: in every MoE layer the selections add up exactly
// to the tokens it routed (in traced graphs) times the experts used per token, every
// layer has its imbalance, and each MUL_MAT_ID span carries its tokens' experts.
func checkMoE(t *testing.T, traces []ptrace.Traces, metrics []pmetric.Metrics, layers, used, experts int64) {
	t.Helper()
	tokens, decodes := tracedTokens(t, spans(traces))
	perLayer := map[int64]int64{}
	lastPoints(metrics, "ggml.moe.expert.selections", func(dp pmetric.NumberDataPoint) {
		l, _ := dp.Attributes().Get("ggml.layer")
		x, _ := dp.Attributes().Get("ggml.moe.expert")
		if x.Int() < 0 || x.Int() >= experts {
			t.Errorf("expert %d in layer %d; the model has %d", x.Int(), l.Int(), experts)
		}
		perLayer[l.Int()] += dp.IntValue()
	})
	// All layers route every token but the last, which computes only the tokens
	// whose logits are wanted: one per decode.
	var total, want int64
	for l := range layers {
		n, w := perLayer[l], tokens*used
		if l == layers-1 {
			w = decodes * used
		}
		if n != w {
			t.Errorf("layer %d: %d selections, want %d", l, n, w)
		}
		total, want = total+n, want+w
	}
	t.Logf("%d tokens in %d decodes, %d experts used of %d, %d MoE layers: %d selections; per layer %v", tokens, decodes, used, experts, layers, total, perLayer)
	if tokens == 0 || total != want || len(perLayer) != int(layers) {
		t.Fatalf("%d selections in %d layers, want %d in %d", total, len(perLayer), want, layers)
	}
	imbalance := 0
	lastPoints(metrics, "ggml.moe.imbalance", func(pmetric.NumberDataPoint) { imbalance++ })
	if imbalance != int(layers) {
		t.Errorf("imbalance for %d layers, want %d", imbalance, layers)
	}
	routed := 0
	for _, s := range spans(traces) {
		if s.name != "MUL_MAT_ID" {
			continue
		}
		ids, _ := s.attrs["ggml.moe.experts"].([]any)
		n, _ := s.attrs["ggml.moe.tokens"].(int64)
		if n <= 0 || int64(len(ids)) != n*used {
			t.Fatalf("MUL_MAT_ID span with %d expert ids for %d tokens, want %d per token", len(ids), n, used)
		}
		routed++
	}
	if routed == 0 {
		t.Fatal("no MUL_MAT_ID spans")
	}
}

// tracedTokens sums the tokens and counts the decodes whose graphs were all traced node
// by node, and checks that no traced graph ran outside a decode.
func tracedTokens(t *testing.T, all []span) (tokens, decodes int64) {
	t.Helper()
	children := map[string][]span{}
	for _, s := range all {
		children[s.parent] = append(children[s.parent], s)
	}
	var graphs func(id string) (n, traced int)
	graphs = func(id string) (n, traced int) {
		for _, c := range children[id] {
			if c.name == "ggml.graph_compute" {
				n++
				if c.attrs["ggml.graph.traced"] == true {
					traced++
				}
			}
			cn, ct := graphs(c.id)
			n, traced = n+cn, traced+ct
		}
		return n, traced
	}
	for _, s := range all {
		if s.name == "ggml.graph_compute" && s.parent == "" && s.attrs["ggml.graph.traced"] == true {
			t.Fatal("a traced graph outside llama_decode")
		}
		if s.name != "llama_decode" {
			continue
		}
		if n, traced := graphs(s.id); n > 0 && n == traced {
			tokens += s.attrs["llama.batch.tokens"].(int64)
			decodes++
		}
	}
	return tokens, decodes
}

// modelShape returns a model's layers (those with experts, in an MoE model), the experts
// used per token and the experts per layer.
func modelShape(t *testing.T, path string) (layers, used, experts int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := gguf.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := g.Lookup("general.architecture")
	num := func(key string) int64 {
		v, ok := g.Lookup(arch.(string) + "." + key)
		if !ok {
			return 0
		}
		switch v := v.(type) {
		case uint32:
			return int64(v)
		case uint64:
			return int64(v)
		}
		t.Fatalf("%s: %T", key, v)
		return 0
	}
	return num("block_count") - num("leading_dense_block_count"), num("expert_used_count"), num("expert_count")
}

// lastPoints calls f for each data point of the last export of a sum or gauge metric.
func lastPoints(metrics []pmetric.Metrics, name string, f func(pmetric.NumberDataPoint)) {
	var last pmetric.Metric
	found := false
	eachMetric(metrics, name, func(m pmetric.Metric) { last, found = m, true })
	if !found {
		return
	}
	var dps pmetric.NumberDataPointSlice
	if last.Type() == pmetric.MetricTypeSum {
		dps = last.Sum().DataPoints()
	} else {
		dps = last.Gauge().DataPoints()
	}
	for i := 0; i < dps.Len(); i++ {
		f(dps.At(i))
	}
}
