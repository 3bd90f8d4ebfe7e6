//go:build e2e

package receiver

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/gguf"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// MoE routing read from the ids of MUL_MAT_ID nodes, on llama-server: in every MoE layer
// the selections add up exactly to the tokens it routed (in traced graphs) times the
// experts used per token, and each MUL_MAT_ID span carries its tokens' experts. moe-uneven
// names the routing of moe-q4_0, whose router sends every token to the same two experts
// of 8, and of moe-hot, whose router favours two (about a third of the tokens each); it is
// silent on moe-even's random router, beside a busy loop too, and on tiny-moe's, which
// uses both its experts for every token.
func TestE2EMoE(t *testing.T) {
	e := testbench.Require(t)
	for _, tc := range []struct {
		model          string
		uneven, beside bool
	}{{"tiny-moe", false, false}, {"moe-even", false, true}, {"moe-hot", true, false}, {"moe-q4_0", true, false}} {
		model := tc.model
		t.Run(model, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			layers, used, experts := modelShape(t, e.Model(model))
			if tc.beside {
				testbench.BusyLoop(t, -1)
			}
			c := startCollector(t, ctx, e.Bin("llama-server"), "nodes: {mode: all}")
			started := time.Now()
			srv, err := e.StartServer(ctx, e.Bin("llama-server"), model, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			waitLogged(t, c, "attached", srv.PID(), started, 30*time.Second)
			// Some 70 tokens routed: where routing is even, a layer's selections vary by
			// chance alone some 0.2 (their coefficient of variation), well below the rule's.
			if _, err := srv.Complete(ctx, "Once upon a time", 64); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
			traces, metrics := c.stop(t)

			checkMoE(t, traces, metrics, layers, used, experts)
			checkUneven(t, summarize(t, c.out), tc.uneven)
		})
	}
}

// checkUneven checks that moe-uneven names the process's routing where it is uneven,
// with its busiest expert's share, and is silent where it is not.
func checkUneven(t *testing.T, v *summary.View, uneven bool) {
	t.Helper()
	advise.Annotate(v)
	if len(v.Processes) != 1 {
		t.Fatalf("%d processes in the summary, want the workload's", len(v.Processes))
	}
	p := v.Processes[0]
	worst := 0.0
	for _, l := range p.MoE {
		worst = max(worst, l.Imbalance)
	}
	var f summary.Finding
	for _, x := range p.Findings {
		if x.ID == "moe-uneven" {
			f = x
		}
	}
	t.Logf("%d MoE layers, the most uneven %.2f; moe-uneven %q %q", len(p.MoE), worst, f.Title, f.Evidence)
	switch {
	case len(p.MoE) == 0:
		t.Error("no MoE layer in the summary")
	case uneven && (f.ID == "" || !strings.Contains(strings.Join(f.Evidence, "\n"), "its busiest expert took")):
		t.Errorf("routing at most %.2f uneven, and moe-uneven %q %q; want it, with the busiest expert's share", worst, f.Title, f.Evidence)
	case !uneven && f.ID != "":
		t.Errorf("routing at most %.2f uneven, and moe-uneven: %q %q", worst, f.Title, f.Evidence)
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
