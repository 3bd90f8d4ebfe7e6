//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// requestSpans are the request spans, by sequence, in order of start.
func requestSpans(all []span) map[int64][]span {
	out := map[int64][]span{}
	for _, s := range all {
		if strings.HasPrefix(s.name, "text_completion") {
			seq := s.attrs["llama.seq_id"].(int64)
			out[seq] = append(out[seq], s)
		}
	}
	for _, ss := range out {
		slices.SortFunc(ss, func(a, b span) int { return int(int64(a.start) - int64(b.start)) })
	}
	return out
}

func attrInt(s span, k string) int {
	v, _ := s.attrs[k].(int64)
	return int(v)
}

func attrFloat(s span, k string) float64 {
	v, _ := s.attrs[k].(float64)
	return v
}

// within says whether got is within frac of want.
func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

// llama-server with four slots under continuous batching: eight concurrent requests in
// two rounds, the second sharing a long prefix with the first so that the prompt cache
// hits. Each request's span agrees with the server's own timings, matched by the slot the
// response names; a request whose client hangs up ends too.
func TestE2ERequests(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-server"), "")
	s, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2, "-np", "4", "-c", "4096")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()

	prefix := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12)
	bySlot := map[int][]testbench.Completion{}
	var mu sync.Mutex
	for round := range 2 {
		var wg sync.WaitGroup
		for i := range 4 {
			prompt := prefix + fmt.Sprintf("Story %d begins here", i)
			if round == 1 {
				prompt += ", and goes on"
			}
			wg.Go(func() {
				r, err := s.CompleteCached(ctx, prompt, 24)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				bySlot[r.Slot] = append(bySlot[r.Slot], r)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}
	// A client that hangs up mid-generation.
	if err := s.CompleteCut(ctx, "Once upon a time", 400, 4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // idle requests end at the reader's next tick
	traces, metrics := c.stop(t)
	all := spans(traces)
	reqs := requestSpans(all)

	cached := 0
	for slot, rs := range bySlot {
		var got []span
		for _, sp := range reqs[int64(slot)] {
			if attrInt(sp, "gen_ai.usage.input_tokens") >= 240 { // the shared prefix: ours, not the warmup's or the cut one's
				got = append(got, sp)
			}
		}
		if len(got) < len(rs) {
			for _, sp := range reqs[int64(slot)] {
				t.Logf("slot %d: %v", slot, sp.attrs)
			}
			t.Fatalf("slot %d: %d request spans after the warmup, want %d", slot, len(got), len(rs))
		}
		for i, r := range rs {
			sp := got[i]
			prompt := attrInt(sp, "llama.request.prompt_tokens")
			cache := attrInt(sp, "gen_ai.usage.cache_read.input_tokens")
			out := attrInt(sp, "gen_ai.usage.output_tokens")
			ttft := attrFloat(sp, "llama.request.time_to_first_token") * 1e3
			tpot := attrFloat(sp, "llama.request.time_per_output_token") * 1e3
			t.Logf("slot %d request %d: prompt %d/%d cached %d/%d output %d/%d, ttft %.1f/%.1f ms, tpot %.2f/%.2f ms, shared max %d, end %v",
				slot, i, prompt, r.Timings.PromptN, cache, r.Timings.CacheN, out, r.Timings.PredictedN,
				ttft, r.Timings.PromptMS, tpot, r.Timings.PredictedPerTokenMS, attrInt(sp, "llama.request.shared_sequences.max"), sp.attrs["llama.request.end"])
			if prompt != r.Timings.PromptN || cache != r.Timings.CacheN || out != r.Timings.PredictedN {
				t.Errorf("slot %d request %d: tokens prompt %d cached %d output %d, llama-server says %d, %d, %d",
					slot, i, prompt, cache, out, r.Timings.PromptN, r.Timings.CacheN, r.Timings.PredictedN)
			}
			if !within(ttft, r.Timings.PromptMS, 0.1) || (r.Timings.PredictedN > 1 && !within(tpot, r.Timings.PredictedPerTokenMS, 0.1)) {
				t.Errorf("slot %d request %d: time to first token %.1f ms, per output token %.2f ms; llama-server says %.1f and %.2f",
					slot, i, ttft, tpot, r.Timings.PromptMS, r.Timings.PredictedPerTokenMS)
			}
			cached += cache
			if len(sp.links) == 0 {
				t.Errorf("slot %d request %d links to no decode", slot, i)
			}
		}
	}
	if cached == 0 {
		t.Error("no request reused the prompt cache")
	}
	// Decode spans say which sequences they carried, and the requests link to them.
	decodes := map[string]span{}
	shared := 0
	for _, sp := range all {
		if sp.name == "llama_decode" {
			decodes[sp.id] = sp
			if ids, ok := sp.attrs["llama.batch.seq_ids"].([]any); ok && len(ids) > 1 {
				shared++
			}
		}
	}
	if shared == 0 {
		t.Error("no decode carried several sequences")
	}
	for _, rs := range reqs {
		for _, sp := range rs {
			for _, l := range sp.links {
				if _, ok := decodes[l]; !ok {
					t.Fatalf("request span links to %s, which is no decode span", l)
				}
			}
		}
	}
	// The request cut short ended on its own, with fewer tokens than it asked for.
	ended := 0
	for _, rs := range reqs {
		for _, sp := range rs {
			if sp.attrs["llama.request.end"] == "idle" && attrInt(sp, "gen_ai.usage.output_tokens") >= 4 &&
				attrInt(sp, "gen_ai.usage.output_tokens") < 400 && attrInt(sp, "gen_ai.usage.input_tokens") < 20 {
				t.Logf("cut short: %v", sp.attrs)
				ended++
			}
		}
	}
	if ended != 1 {
		for _, rs := range reqs {
			for _, sp := range rs {
				t.Logf("%v", sp.attrs)
			}
		}
		t.Errorf("%d idle short-prompt requests, want the one cut short", ended)
	}
	// The summary the views and the report show has them.
	agg := summary.New()
	for _, td := range traces {
		agg.Traces(td)
	}
	folded := 0
	for _, p := range agg.Snapshot().Processes {
		if p.Requests != nil {
			folded += int(p.Requests.Count)
			t.Logf("summary: %+v", *p.Requests)
		}
	}
	if folded < 9 {
		t.Errorf("the summary has %d requests, want at least 9", folded)
	}
	// The GenAI server metrics count every request, with the conventions' attributes.
	n := uint64(0)
	eachMetric(metrics, "gen_ai.server.time_to_first_token", func(m pmetric.Metric) {
		dp := m.Histogram().DataPoints().At(0)
		n = dp.Count()
		if v, _ := dp.Attributes().Get("gen_ai.provider.name"); v.Str() != "llama.cpp" {
			t.Errorf("gen_ai.provider.name %q", v.Str())
		}
		if v, _ := dp.Attributes().Get("gen_ai.request.model"); v.Str() == "" {
			t.Error("no gen_ai.request.model")
		}
	})
	if n < 9 {
		t.Errorf("time to first token counted %d requests, want at least 9", n)
	}
	want := map[string]int{}
	for _, rs := range bySlot {
		for _, r := range rs {
			want["cached_input"] += r.Timings.CacheN
		}
	}
	got := map[string]int64{}
	eachMetric(metrics, "llama.request.tokens", func(m pmetric.Metric) {
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			dp := m.Sum().DataPoints().At(i)
			kind, _ := dp.Attributes().Get("gen_ai.token.type")
			got[kind.Str()] = dp.IntValue()
		}
	})
	if got["cached_input"] < int64(want["cached_input"]) || got["input"] == 0 || got["output"] == 0 {
		t.Errorf("llama.request.tokens %v; the server reused %d cached tokens", got, want["cached_input"])
	}
}

// checkBenchRequests checks the requests of llama-bench, whose batches name no sequence
// (llama_batch_get_one) and which clears the cache before each run: a request per run on
// sequence 0, said to be implicit, and every token of its decodes accounted for.
func checkBenchRequests(t *testing.T, traces []ptrace.Traces) {
	t.Helper()
	n, in, out := tally(t, traces, func(sp span) {
		if sp.attrs["llama.batch.implicit_seq"] != true || attrInt(sp, "llama.seq_id") != 0 {
			t.Errorf("llama-bench request not on the implicit sequence 0: %v", sp.attrs)
		}
	})
	if n < 3 {
		t.Errorf("%d requests from llama-bench's pp, tg and pg runs", n)
	}
	t.Logf("llama-bench: %d requests, %d prompt and %d output tokens", n, in, out)
}

// tally counts the request spans and their prompt and output tokens, calling each on
// every one, and checks that every token a successful decode computed is a prompt token
// or an output fed back.
func tally(t *testing.T, traces []ptrace.Traces, each func(span)) (n, in, out int) {
	t.Helper()
	all := spans(traces)
	for _, rs := range requestSpans(all) {
		for _, sp := range rs {
			n++
			out += attrInt(sp, "gen_ai.usage.output_tokens")
			in += attrInt(sp, "llama.request.prompt_tokens")
			each(sp)
		}
	}
	batch := 0
	for _, sp := range all {
		if sp.name == "llama_decode" && sp.attrs["llama.decode.result"] == int64(0) {
			batch += attrInt(sp, "llama.batch.tokens")
		}
	}
	if batch != in+out-n {
		t.Errorf("decodes computed %d tokens; requests account for %d prompt and %d fed back", batch, in, out-n)
		for _, sp := range all {
			if sp.name == "llama_decode" || strings.HasPrefix(sp.name, "text_completion") {
				t.Logf("%d %s %v", sp.start, sp.name, sp.attrs)
			}
		}
	}
	return n, in, out
}

// checkNodeRequests checks the requests of the node driver, which generates on a sequence
// of its own repeat times: as many request spans as generations, their output tokens the
// tokens the driver counted, and their decodes' tokens all accounted for. The driver's
// first prompt comes right after it loads the model, and the libraries it loads with
// dlopen are probed before that: a request whose prompt decode went unseen would start
// with its first generation step (a one-token prompt, which the driver never sends).
func checkNodeRequests(t *testing.T, traces []ptrace.Traces, repeat, tokens int) {
	t.Helper()
	late := 0
	var seen []span
	n, _, out := tally(t, traces, func(sp span) {
		if attrInt(sp, "llama.request.prompt_tokens") == 1 {
			late++
		}
		seen = append(seen, sp)
	})
	if n != repeat || out != tokens || late > 0 {
		t.Errorf("%d requests generating %d tokens (%d begun before the probes); the driver ran %d generating %d",
			n, out, late, repeat, tokens)
		for _, sp := range seen {
			t.Logf("request %d-%d: %d prompt, %d output tokens, ended %v", sp.start, sp.end,
				attrInt(sp, "llama.request.prompt_tokens"), attrInt(sp, "gen_ai.usage.output_tokens"), sp.attrs["llama.request.end"])
		}
	}
}

// Many short requests over a run, four at a time on four slots: every one is reported, and
// none is still followed when the run ends (the per-sequence state is what is in flight,
// not what was).
func TestE2EManyShortRequests(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, e.Bin("llama-server"), "")
	s, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2, "-np", "4", "-c", "2048")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	const workers, each = 4, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.CompleteCached(ctx, fmt.Sprintf("Worker %d asks question %d", w, i), 1+i%3); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(2500 * time.Millisecond) // the last ones end idle
	traces, _ := c.stop(t)
	ended := map[string]int{}
	n := 0
	for _, rs := range requestSpans(spans(traces)) {
		for _, sp := range rs {
			ended[fmt.Sprint(sp.attrs["llama.request.end"])]++
			if attrInt(sp, "gen_ai.usage.output_tokens") >= 1 && attrInt(sp, "gen_ai.usage.input_tokens") > 5 {
				n++
			}
		}
	}
	t.Logf("%d requests with a prompt; ended: %v", n, ended)
	if n < workers*each {
		t.Errorf("%d requests reported, want %d", n, workers*each)
	}
	if ended["stopped"] != 0 || ended["evicted"] != 0 {
		t.Errorf("requests still followed at shutdown or evicted: %v", ended)
	}
}
