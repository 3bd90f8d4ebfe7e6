//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/page"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// A busy server, as llama-server serves by default: several requests at once in parallel
// slots, every generating slot's next token in one decode, a new request's prompt beside
// them. Under make run's configuration, one collector for every server:
//
//   - four slots, a request alone then eight at once: every generated token in decode,
//     the phases' tokens adding up to the prompts and the outputs, each request's time per
//     output token within 5% of the server's own, decode steps by width;
//   - the same with a long prompt arriving while three requests generate, its chunk a
//     decode 2048 tokens and 128: prompts-stall on both, the longest gaps shorter with the
//     smaller chunk;
//   - two slots and three (steps of 2 and 3 sequences, which llama.cpp's repacked Q4_0
//     matmuls compute a sequence at a time): batching-little, and not with four;
//   - a slot's share of a small context reached, the generation cut (truncated) and,
//     with --context-shift, shifted: context-full;
//   - one slot, one request after another: none of the three;
//   - a model with a 128k vocabulary, n_probs 10 asked of every other request: the time
//     between decodes grows, and each request's time still adds up.
func TestE2EBusyServer(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out.pb")
	cfg, _, prom := defaultConfig(t, out)
	runCollector(t, ctx, cfg)
	server := func(args ...string) *testbench.Server {
		s, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2, args...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ask := func(s *testbench.Server, body map[string]any) testbench.Completion {
		c, err := s.Request(ctx, body)
		if err != nil {
			t.Error(err)
		}
		return c
	}
	// at once sends n requests together, each its own prompt, and returns the server's
	// answers.
	atOnce := func(s *testbench.Server, n, predict int) []testbench.Completion {
		answers := make([]testbench.Completion, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { answers[i] = ask(s, completion(prompt(i, 12), predict)) })
		}
		wg.Wait()
		return answers
	}
	// A request alone (the steps of one sequence, to compare the wider ones with), then
	// a burst.
	burst := func(slots, n, predict int) (int, []testbench.Completion) {
		s := server("-np", fmt.Sprint(slots), "-c", "4096")
		defer s.Stop()
		alone := ask(s, completion(prompt(99, 12), 32))
		return s.PID(), append(atOnce(s, n, predict), alone)
	}
	// Three requests generating, then a long prompt: its chunks computed beside their
	// next tokens.
	stalled := func(batch int) int {
		s := server("-np", "4", "-c", "4096", "-b", fmt.Sprint(batch), "-ub", fmt.Sprint(min(batch, 512)))
		defer s.Stop()
		var wg sync.WaitGroup
		var started sync.WaitGroup
		for i := range 3 {
			started.Add(1)
			wg.Go(func() {
				var once sync.Once
				if _, err := s.Stream(ctx, completion(prompt(i, 12), 96), func(int) { once.Do(started.Done) }); err != nil {
					t.Error(err)
				}
			})
		}
		started.Wait()
		ask(s, completion(prompt(50, 240), 4))
		wg.Wait()
		return s.PID()
	}
	four, answers := burst(4, 8, 40)
	stall2048 := stalled(2048)
	stall128 := stalled(128)
	two, _ := burst(2, 6, 40)
	three, _ := burst(3, 6, 40)
	// A slot's share of 512 cells: a prompt of some 150 tokens and 400 to generate.
	cut := server("-np", "2", "-c", "512")
	cutAnswer := ask(cut, completion(prompt(7, 60), 400))
	cut.Stop()
	shifted := server("-np", "2", "-c", "512", "--context-shift")
	ask(shifted, completion(prompt(8, 60), 300))
	shifted.Stop()
	healthy := server("-np", "1", "-c", "4096")
	for i := range 3 {
		ask(healthy, completion(prompt(i, 12), 32))
	}
	healthy.Stop()
	// The server's time between decodes, planted: over a Llama-3-sized vocabulary, the
	// probabilities of each token's top 10 (n_probs) cost a share of a small model's token.
	big, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-128k-f16", 2, "-np", "1", "-c", "2048")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		body := completion(prompt(i, 12), 48)
		if i%2 == 1 {
			body["n_probs"] = 10
		}
		ask(big, body)
	}
	big.Stop()
	settle(t, ctx, out)

	v := summarize(t, out)
	advise.Annotate(v)
	reqs := requestsByPID(t, out)

	// Four slots: every generated token in decode (or beside a prompt, in mixed), the
	// phases' tokens adding up, steps by width.
	p := byPID(t, v, four)
	text := table(t, p)
	t.Logf("-np 4:\n%s", text)
	checkPhasesAddUp(t, "-np 4", p)
	dec := phaseNamed(t, p, "decode")
	four4 := width(dec, "4")
	if four4 == nil || four4.Steps < 20 || four4.Cost <= 1 {
		t.Fatalf("-np 4: decode steps of 4 sequences %+v, want 20 or more against steps of one", four4)
	}
	if s := p.Serving; s == nil || s.MaxSequences != 4 || s.Slots != 4 || s.SeqContext != 1024 || s.Context != 4096 || s.KVCells < 4*40 {
		t.Errorf("-np 4: serving %+v, want 4 sequences at most of 4 slots, 1024 cells each of 4096", s)
	}
	for _, want := range []string{"serving: ", "sequences a step", "gaps between a request's output tokens", "where the requests' latency went"} {
		if !strings.Contains(text, want) {
			t.Errorf("-np 4: the report lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^\s+4\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+×`).MatchString(text) {
		t.Errorf("-np 4: the report has no row of steps of 4 sequences against one")
	}
	checkTPOT(t, answers, reqs[int64(four)])
	checkServingPage(t, p)
	checkLatencyShares(t, reqs[int64(four)])
	// Steps of 4 share the weights' reading. What that buys is the CPU's: 2.1× a single
	// sequence's tokens with AVX-512, 1.3× with AVX2's kernels, where compute bounds the
	// steps and batching-little says so (checked against steps of 2 and 3 below).
	if f := finding(p, "batching-little"); (f != nil) != (four4.Gain <= 4.0/3) ||
		f != nil && !strings.Contains(f.Advice, "the CPU's compute, not the weights' reading, bounds them") {
		t.Errorf("-np 4: steps of 4 at %.2f× a single sequence's tokens; batching-little: %+v", four4.Gain, f)
	} else if f != nil {
		t.Logf("-np 4: %s %v", f.Title, f.Evidence)
	}

	// A long prompt stalls three generating requests; in chunks of 128 less long.
	var worst [2]float64
	for i, pid := range []int{stall2048, stall128} {
		p := byPID(t, v, pid)
		name := []string{"-b 2048", "-b 128"}[i]
		checkPhasesAddUp(t, name, p)
		f := finding(p, "prompts-stall")
		r := p.Requests
		if f == nil || r.Stalled < 3 {
			t.Errorf("%s: no stall of the three generating requests: %+v %v", name, r, findingIDs(p))
			continue
		}
		t.Logf("%s: %s: %s %v", name, f.Severity, f.Title, f.Evidence)
		worst[i] = r.GapMax.Max
		if mixed := phaseNamed(t, p, "mixed"); mixed.PromptTokens < 200 || mixed.NextTokens < 2 {
			t.Errorf("%s: mixed decodes %+v, want the long prompt's tokens beside the generating requests'", name, mixed)
		}
	}
	if worst[1] >= worst[0] {
		t.Errorf("the longest gap %.0f ms in chunks of 128 against %.0f ms in chunks of 2048: want shorter", worst[1], worst[0])
	}

	// Two and three slots: steps of two or three sequences at nearly as many steps of one,
	// which buy less than steps of 4, on any CPU.
	for _, pid := range []int{two, three} {
		p := byPID(t, v, pid)
		checkPhasesAddUp(t, p.Title, p)
		f := finding(p, "batching-little")
		if f == nil {
			t.Errorf("%s: batching-little did not fire: widths %+v", p.Title, phaseNamed(t, p, "decode").Widths)
			continue
		}
		t.Logf("%s: %s %v", p.Title, f.Title, f.Evidence)
		for _, w := range phaseNamed(t, p, "decode").Widths {
			if w.Sequences > 1 && w.Steps >= 16 && w.Gain*1.1 > four4.Gain {
				t.Errorf("%s: steps of %s sequences computed %.2f× a single sequence's tokens, against %.2f× for steps of 4: want less",
					p.Title, w.Width, w.Gain, four4.Gain)
			}
		}
	}

	// The context reached: cut there, then shifted.
	p = byPID(t, v, cut.PID())
	if f := finding(p, "context-full"); f == nil || f.Severity != "warning" || p.Requests.Truncated != 1 || !cutAnswer.Truncated {
		t.Errorf("-c 512 -np 2: the cut request (truncated %v, %d tokens): %+v %v", cutAnswer.Truncated, cutAnswer.TokensPredicted, p.Requests, findingIDs(p))
	} else {
		t.Logf("cut: %s %v", f.Title, f.Evidence)
	}
	p = byPID(t, v, shifted.PID())
	if f := finding(p, "context-full"); f == nil || f.Severity != "info" || p.Requests.Shifts == 0 || p.Requests.Truncated != 0 {
		t.Errorf("--context-shift: %+v %v", p.Requests, findingIDs(p))
	} else {
		t.Logf("shifted: %s %v", f.Title, f.Evidence)
	}

	// n_probs over 128k tokens: the time between decodes grows, each request's time still
	// adding up.
	var plain, probs []float64
	for i, r := range sortedByStart(reqs[int64(big.PID())]) {
		n := float64(r.attrs[schema.GenAIUsageOutputTokens].(int64) - 1)
		between := 1e3 * r.attrs[schema.LlamaRequestTimePrefix+"between"].(float64) / n
		if i%2 == 1 {
			probs = append(probs, between)
		} else {
			plain = append(plain, between)
		}
	}
	checkLatencyShares(t, reqs[int64(big.PID())])
	if len(plain) != 3 || len(probs) != 3 || median(slices.Clone(probs)) < 1.5*median(slices.Clone(plain)) {
		t.Errorf("a 128k vocabulary: between decodes %v ms a token, with n_probs 10 %v: want half as much again", plain, probs)
	}

	// One slot, one request after another: nothing of the three.
	p = byPID(t, v, healthy.PID())
	checkPhasesAddUp(t, "-np 1", p)
	for _, id := range []string{"prompts-stall", "batching-little", "context-full"} {
		if f := finding(p, id); f != nil {
			t.Errorf("-np 1, one at a time: %s %s %v", id, f.Title, f.Evidence)
		}
	}
	if w := phaseNamed(t, p, "decode").Widths; len(w) != 1 || w[0].Width != "1" {
		t.Errorf("-np 1: widths %+v, want steps of one sequence alone", w)
	}
	got := findingsOut(t, ctx, out, prom, func(got pipelineFindings) bool {
		return got.logged[int64(stall2048)]["prompts-stall"] != "" && got.logged[int64(cut.PID())]["context-full"] != ""
	})
	if got.logged[int64(two)]["batching-little"] == "" || got.logged[int64(healthy.PID())]["prompts-stall"] != "" {
		t.Errorf("the pipeline's findings: %v", got.logged)
	}
}

// completion is a /completion request's body: prompt, n tokens to generate whatever the
// model samples (the random weights' end-of-text token ended a 300-token request at 119,
// short of the context shift it was to make), the slot's cache not reused.
func completion(prompt string, n int) map[string]any {
	return map[string]any{"prompt": prompt, "n_predict": n, "ignore_eos": true, "cache_prompt": false}
}

// prompt is request i's own prompt of some words: no two share a start.
func prompt(i, words int) string {
	w := []string{fmt.Sprintf("Request %d:", i)}
	for j := range words {
		w = append(w, []string{"tell", "me", "about", "the", "weather", "in", "mountains", "today"}[(i+j)%8])
	}
	return strings.Join(w, " ")
}

func width(ph *summary.Phase, name string) *summary.Width {
	for i := range ph.Widths {
		if ph.Widths[i].Width == name {
			return &ph.Widths[i]
		}
	}
	return nil
}

// checkPhasesAddUp checks that p's phases hold every token its requests computed: the
// prompts in prefill (llama.cpp's warm-ups at load too), every output but
// each request's first (which its prompt's last decode computed) in decode, counting the
// tokens of each kind that mixed decodes computed.
func checkPhasesAddUp(t *testing.T, name string, p *summary.Process) {
	t.Helper()
	r := p.Requests
	if r == nil {
		t.Errorf("%s: no requests", name)
		return
	}
	var prefill, decode int64
	for _, ph := range p.Phases {
		switch ph.Name {
		case "prefill":
			prefill += ph.Tokens + ph.MixedTokens
		case "decode":
			decode += ph.Tokens + ph.MixedTokens
		}
	}
	if decode != r.Output-r.Count {
		t.Errorf("%s: %d tokens in decode, want the %d outputs but each of %d requests' first", name, decode, r.Output, r.Count)
	}
	if prefill != r.Input+r.WarmupTokens || r.WarmupTokens == 0 {
		t.Errorf("%s: %d tokens in prefill, want the %d prompt tokens and the warm-ups' %d", name, prefill, r.Input, r.WarmupTokens)
	}
}

// checkTPOT checks each request's time per output token against llama-server's own
// (timings.predicted_per_token_ms): the server divides the time from its first token to
// its last by all its tokens, profinfer by the gaps between them, one fewer.
func checkTPOT(t *testing.T, answers []testbench.Completion, reqs []span) {
	t.Helper()
	bySlot := map[int][]span{}
	for _, r := range reqs {
		bySlot[int(r.attrs[schema.LlamaSeqID].(int64))] = append(bySlot[int(r.attrs[schema.LlamaSeqID].(int64))], r)
	}
	answered := map[int][]testbench.Completion{}
	for _, a := range answers {
		answered[a.Slot] = append(answered[a.Slot], a)
	}
	checked := 0
	for slot, as := range answered {
		slices.SortFunc(as, func(x, y testbench.Completion) int { return x.Done.Compare(y.Done) })
		rs := bySlot[slot]
		slices.SortFunc(rs, func(x, y span) int { return int(int64(x.start) - int64(y.start)) })
		if len(rs) != len(as) {
			t.Errorf("slot %d: %d request spans for %d answers", slot, len(rs), len(as))
			continue
		}
		for i, a := range as {
			n := a.Timings.PredictedN
			got, ok := rs[i].attrs[schema.LlamaRequestTimePerOutputToken].(float64)
			if !ok || n < 2 {
				t.Errorf("slot %d, request %d: no time per output token (%d predicted)", slot, i, n)
				continue
			}
			server := a.Timings.PredictedPerTokenMS * float64(n) / float64(n-1)
			if math.Abs(1e3*got/server-1) > 0.05 {
				t.Errorf("slot %d, request %d: %.2f ms per output token, the server's %.2f (over %d tokens)", slot, i, 1e3*got, server, n)
			}
			checked++
		}
	}
	if checked < len(answers) {
		t.Errorf("%d of %d requests' time per output token checked", checked, len(answers))
	}
}

// checkLatencyShares checks that each request's time adds up, share by share, to its span.
func checkLatencyShares(t *testing.T, reqs []span) {
	t.Helper()
	for _, r := range reqs {
		var sum float64
		for _, name := range summary.TimeShares[1:] {
			sum += r.attrs[schema.LlamaRequestTimePrefix+name].(float64)
		}
		if span := float64(r.end-r.start) / 1e9; math.Abs(sum-span) > 0.02*span {
			t.Errorf("request on slot %v: shares sum to %.3f s, its span is %.3f s", r.attrs[schema.LlamaSeqID], sum, span)
		}
	}
}

// requestsByPID reads the request spans the collector wrote to out, by process, llama.cpp's
// warm-up left out.
func requestsByPID(t *testing.T, out string) map[int64][]span {
	t.Helper()
	var got batches
	if err := readOutput(out, &got); err != nil {
		t.Fatal(err)
	}
	by := map[int64][]span{}
	for _, s := range spans(got.traces) {
		if s.attrs[schema.GenAIOperationName] != nil && s.attrs[schema.LlamaRequestWarmup] == nil {
			by[s.pid] = append(by[s.pid], s)
		}
	}
	return by
}

// Ollama as it ships, four requests of a model at once (OLLAMA_NUM_PARALLEL=4), twice
// that many sent together: its runner, llama-server, computes them in the same decodes,
// and the phases, the steps by width and the serving figures are llama-server's own.
func TestE2EOllamaBusy(t *testing.T) {
	e := testbench.Require(t)
	testbench.RequireOllama(t, e.OllamaExe())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out.pb")
	cfg, _, _ := defaultConfig(t, out)
	runCollector(t, ctx, cfg)
	o, err := testbench.StartOllama(ctx, e.OllamaExe(), t.TempDir(), "OLLAMA_NUM_PARALLEL=4")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	if err := o.Create(ctx, "llama-1b", e.Model("llama-1b-q4_0")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Generate(ctx, "llama-1b", "The capital of France is", 24, ""); err != nil {
		t.Fatal(err)
	}
	pid := runner(t, ctx, o)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := o.Generate(ctx, "llama-1b", prompt(i, 12), 32, ""); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	settle(t, ctx, out)
	v := summarize(t, out)
	advise.Annotate(v)
	p := byPID(t, v, pid)
	t.Logf("runner %d:\n%s", pid, table(t, p))
	checkPhasesAddUp(t, "Ollama", p)
	if w := width(phaseNamed(t, p, "decode"), "4"); w == nil || w.Steps < 16 {
		t.Errorf("Ollama: decode steps of 4 sequences %+v, want 16 or more", w)
	}
	if s := p.Serving; s == nil || s.MaxSequences != 4 || s.Slots != 4 {
		t.Errorf("Ollama: serving %+v, want four sequences at most of four slots", s)
	}
}

// checkServingPage checks that report.html, for process p, has the serving section in
// Chromium: the steps by width, a step of four among them, and the requests' latency by
// share.
func checkServingPage(t *testing.T, p *summary.Process) {
	t.Helper()
	br := testbench.RequireBrowser(t)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := page.WriteFile(path, &summary.View{Generated: time.Now(), Processes: []*summary.Process{p}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom, consoleErrors, err := br.DOM(ctx, "file://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if len(consoleErrors) > 0 {
		t.Errorf("report.html: console errors %q", consoleErrors)
	}
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // each table's rows' first cells, by the table's id
	testbench.Walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode || n.Data != "table" || attr(n, "id") == "" {
			return
		}
		id := attr(n, "id")
		testbench.Walk(n, func(r *html.Node) {
			if r.Type == html.ElementNode && r.Data == "td" && r.Parent != nil && r.Parent.FirstChild == r {
				rows[id] = append(rows[id], testbench.Text(r))
			}
		})
	})
	if !slices.Contains(rows["widths"], "1") || !slices.Contains(rows["widths"], "4") || len(rows["latency-shares"]) < 3 {
		t.Errorf("report.html's serving section: steps by width %q, the latency's shares %q", rows["widths"], rows["latency-shares"])
	}
}

// sortedByStart is spans in the order they began.
func sortedByStart(ss []span) []span {
	out := slices.Clone(ss)
	slices.SortFunc(out, func(a, b span) int { return int(int64(a.start) - int64(b.start)) })
	return out
}
