//go:build e2e

package receiver

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Two llama-servers and a llama-bench, each with its own model and thread count, run at
// once under one collector. Every span and metric lands on its own process's resource:
// each process's graphs have its thread count and its model's layers, its resources name
// its model (from its first decode on), and its node and token metrics equal what its own
// spans count.
func TestE2EMultipleTargets(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollectorOf(t, ctx, []string{e.Bin("llama-server"), e.Bin("llama-bench")}, fullTracing)

	type target struct {
		model   string
		threads int64
		pid     int
	}
	servers := []*target{{model: "tiny-dense", threads: 1}, {model: "tiny-moe", threads: 2}}
	bench := &target{model: "llama-1b-q4_0", threads: 2}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, tg := range servers {
		started := time.Now()
		s, err := e.StartServer(ctx, e.Bin("llama-server"), tg.model, int(tg.threads))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		tg.pid = s.PID()
		waitLogged(t, c, "attached", s.PID(), started, 10*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if _, err := s.Complete(ctx, "Once upon a time", 8); err != nil {
					errs <- err
				}
			}
		}()
	}
	b, err := testbench.Start(e.Bin("llama-bench"), e.BenchArgs(bench.model, 16, 8, int(bench.threads), 1)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	bench.pid = b.PID()
	errs <- b.Wait(ctx)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)

	byPID := map[int64]*target{}
	for _, tg := range append(servers, bench) {
		byPID[int64(tg.pid)] = tg
	}
	type seen struct {
		layers   map[int64]bool
		mulmats  int64
		tokens   map[string]int64 // by phase
		resource []any            // the model path each resource names
	}
	got := map[int64]*seen{}
	for pid := range byPID {
		got[pid] = &seen{layers: map[int64]bool{}, tokens: map[string]int64{}}
	}
	for _, s := range spans(traces) {
		tg, g := byPID[s.pid], got[s.pid]
		if tg == nil {
			t.Fatalf("span %s on the resource of pid %d, which is none of the targets %v", s.name, s.pid, slices.Collect(maps.Keys(byPID)))
		}
		switch s.name {
		case "ggml.graph_compute":
			if s.attrs["ggml.threads"] != tg.threads {
				t.Fatalf("pid %d (%s, %d threads): graph span with ggml.threads %v", s.pid, tg.model, tg.threads, s.attrs["ggml.threads"])
			}
		case "MUL_MAT":
			g.mulmats++
			if l, ok := s.attrs["ggml.layer"].(int64); ok {
				g.layers[l] = true
			}
		case "llama_decode":
			g.tokens[s.attrs["llama.phase"].(string)] += s.attrs["llama.batch.tokens"].(int64)
		}
	}
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			r := td.ResourceSpans().At(i).Resource().Attributes().AsRaw()
			got[r["process.pid"].(int64)].resource = append(got[r["process.pid"].(int64)].resource, r["llama.model.path"])
		}
	}
	mulmats, tokens := lastByPID(metrics, "ggml.op.count", "ggml.op"), lastByPID(metrics, "llama.decode.tokens", "llama.phase")
	for pid, tg := range byPID {
		g := got[pid]
		layers, _, _ := modelShape(t, e.Model(tg.model))
		if len(g.layers) != int(layers) || !g.layers[0] || !g.layers[layers-1] {
			t.Errorf("pid %d (%s): MUL_MAT spans in layers %v, want 0 to %d", pid, tg.model, slices.Sorted(maps.Keys(g.layers)), layers-1)
		}
		for _, m := range g.resource {
			if m != e.Model(tg.model) {
				t.Errorf("pid %d: resource llama.model.path %v, want %s", pid, m, e.Model(tg.model))
			}
		}
		if n := mulmats[pid]["MUL_MAT"]; n != g.mulmats || n == 0 {
			t.Errorf("pid %d (%s): ggml.op.count for MUL_MAT %d, its MUL_MAT spans %d", pid, tg.model, n, g.mulmats)
		}
		for _, phase := range []string{"prefill", "decode"} {
			if n := tokens[pid][phase]; n != g.tokens[phase] || n == 0 {
				t.Errorf("pid %d (%s): llama.decode.tokens for %s %d, its llama_decode spans %d", pid, tg.model, phase, n, g.tokens[phase])
			}
		}
		t.Logf("pid %d (%s, %d threads): %d MUL_MAT, tokens %v", pid, tg.model, tg.threads, g.mulmats, g.tokens)
	}
}

// lastByPID returns the last exported value of an int sum metric, per process and value
// of one attribute, summed over its other attributes.
func lastByPID(metrics []pmetric.Metrics, name, attr string) map[int64]map[string]int64 {
	out := map[int64]map[string]int64{}
	for _, md := range metrics {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			pid, _ := rm.Resource().Attributes().Get("process.pid")
			fresh := map[string]int64{} // this export's values replace the last one's
			found := false
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if ms.At(k).Name() != name {
						continue
					}
					found = true
					dps := ms.At(k).Sum().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						v, _ := dps.At(d).Attributes().Get(attr)
						fresh[v.AsString()] += dps.At(d).IntValue()
					}
				}
			}
			if found {
				out[pid.Int()] = fresh
			}
		}
	}
	return out
}
