//go:build e2e

package receiver

// GGML runtimes beside llama.cpp itself, each profiled as it ships: whisper.cpp's Node
// addon (CPU, and Vulkan on lavapipe), llama.cpp linked into an addon (llama.node), and
// Ollama, as it ships (llama-server children) and before 0.30 (its own Go engine).

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"golang.org/x/net/html"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/page"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// whisperRun profiles w under the collector with receiver settings, and returns what was
// exported, the process's summary and the driver's own account.
func whisperRun(t *testing.T, w testbench.Whisper, settings string) ([]ptrace.Traces, []pmetric.Metrics, *summary.Process, testbench.WhisperResult) {
	t.Helper()
	e := testbench.Require(t)
	e.RequireFugood(t)
	if w.Vulkan {
		e.RequireVulkan(t)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	// The driver loads its model and waits, as a service for its first request, until
	// the collector attached to it: whisper-micro transcribes in a fraction of a second,
	// and a job begun before the probes is not seen (README, Limitations).
	w.Gate = filepath.Join(t.TempDir(), "go")
	name, args := w.Command(e, node)
	open := func(c *collector, p *testbench.Process) {
		waitLogged(t, c, "attached", p.PID(), time.Now(), 30*time.Second)
		if err := os.WriteFile(w.Gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := profileRun(t, 8*time.Minute, node, settings, open, name, args...)
	var r testbench.WhisperResult
	if err := testbench.ParseLast(run.proc.Stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d transcriptions of %.1f s of audio in %.1f s (gpu %v)", w.Model, w.Runs, r.AudioSeconds, r.Seconds, r.GPU)
	if !regexp.MustCompile(`\sattached\s+\{.*"pid": ` + strconv.Itoa(r.PID) + `[,}].*"runtime": "whisper.cpp"`).MatchString(run.log) {
		t.Errorf("the driver (pid %d) was not attached as whisper.cpp:\n%s", r.PID, run.log)
	}
	if strings.Contains(run.log, "\twarn\t") {
		t.Errorf("the collector warned:\n%s", run.log)
	}
	return run.traces, run.metrics, run.summary, r
}

// checkTranscriptions asserts what whisper.cpp's application layer must show for runs
// transcriptions of the test bench's recording: a transcription span each, with the
// audio's length and its real-time factor, holding one encode (the convolution, the
// encoder, the cross-attention, a pass each, in that order) and the decoder's passes,
// the first with the prompt's tokens; and the same in the metrics. It returns the steps.
func checkTranscriptions(t *testing.T, traces []ptrace.Traces, metrics []pmetric.Metrics, runs int) []span {
	t.Helper()
	all := spans(traces)
	children := map[string][]span{}
	var jobs, steps []span
	for _, s := range all {
		children[s.parent] = append(children[s.parent], s)
		switch s.name {
		case "whisper.transcription":
			jobs = append(jobs, s)
		case "whisper.encode", "whisper.decode":
			steps = append(steps, s)
		case "llama_decode", "ggml.backend_sched.graph_compute":
			t.Errorf("a %s span in a whisper.cpp process: %v", s.name, s.attrs)
		}
	}
	if len(jobs) != runs {
		t.Fatalf("%d whisper.transcription spans, want %d", len(jobs), runs)
	}
	for _, j := range jobs {
		if a := j.attrs["whisper.audio.seconds"]; a != 3.0 {
			t.Errorf("transcription of %v s of audio, want the recording's 3", a)
		}
		rtf, want := j.attrs["whisper.real_time_factor"].(float64), float64(j.end-j.start)/1e9/3
		if math.Abs(rtf-want) > 1e-6*want {
			t.Errorf("real-time factor %v, want its time over the audio's, %v", rtf, want)
		}
		var stages []any
		decodes := 0
		for _, s := range children[j.id] {
			stages = append(stages, s.attrs["ggml.step.stage"])
			if s.name == "whisper.decode" {
				decodes++
				if tok, _ := s.attrs["ggml.step.tokens"].(int64); tok < 1 || decodes == 1 && tok < 3 {
					t.Errorf("decoder pass %d of %v tokens; the first decodes the prompt (3 or more)", decodes, s.attrs["ggml.step.tokens"])
				}
			}
			if s.start < j.start || s.end > j.end {
				t.Errorf("%s outside its transcription", s.name)
			}
		}
		if len(stages) < 4 || !slices.Equal(stages[:3], []any{"conv", "encoder", "cross"}) || decodes == 0 {
			t.Errorf("a transcription's steps by graph: %v, want conv, encoder, cross, then the decoder's", stages)
		}
		if j.attrs["whisper.encode.passes"] != int64(3) || j.attrs["whisper.decode.passes"] != int64(decodes) {
			t.Errorf("transcription counts %v encode and %v decode passes, its spans 3 and %d", j.attrs["whisper.encode.passes"],
				j.attrs["whisper.decode.passes"], decodes)
		}
	}
	if n, _ := lastSum(metrics, "whisper.transcription.count"); n != int64(runs) {
		t.Errorf("whisper.transcription.count = %d, want %d", n, runs)
	}
	return steps
}

// whisper.cpp's addon, on the CPU and under the default settings: a transcription
// span each, its encode and decode passes inside, the model's hyperparameters on the
// resource, and a summary that reads as speech.
func TestE2EWhisper(t *testing.T) {
	traces, metrics, p, _ := whisperRun(t, testbench.Whisper{Model: "whisper-micro", Runs: 2, Threads: 2}, "")
	checkTranscriptions(t, traces, metrics, 2)
	res := traces[0].ResourceSpans().At(0).Resource().Attributes().AsRaw()
	for k, want := range map[string]any{"ggml.runtime": "whisper.cpp", "whisper.model.audio_layers": int64(1),
		"whisper.model.text_layers": int64(1), "whisper.model.audio_state": int64(64), "whisper.model.vocabulary": int64(51865),
		"whisper.model.mels": int64(80), "whisper.model.file_type": "F16", "whisper.model.type": "unknown"} {
		if res[k] != want {
			t.Errorf("resource %s = %v, want %v", k, res[k], want)
		}
	}
	if p.Runtime != "whisper.cpp" || p.Jobs == nil || p.Jobs.Count != 2 || p.Jobs.AudioSeconds != 6 || p.Jobs.EncodePasses != 6 {
		t.Errorf("summary: runtime %q, transcriptions %+v", p.Runtime, p.Jobs)
	}
	for _, ph := range p.Phases {
		if ph.Name == "prefill" || ph.Name == "outside decode" {
			t.Errorf("a whisper.cpp process has a %s phase", ph.Name)
		}
	}
}

// Traced node by node, whisper.cpp's encoder and decoder each have their op table; the
// page shows them as the encoder's and the decoder's passes, in Chromium.
func TestE2EWhisperOps(t *testing.T) {
	traces, metrics, p, _ := whisperRun(t, testbench.Whisper{Model: "whisper-micro", Runs: 1, Threads: 2}, fullTracing)
	steps := checkTranscriptions(t, traces, metrics, 1)
	phases := map[string]*summary.Phase{}
	for _, ph := range p.Phases {
		phases[ph.Name] = ph
	}
	for name, ops := range map[string][]string{"encode": {"IM2COL", "MUL_MAT", "GELU"}, "decode": {"GET_ROWS", "MUL_MAT", "SOFT_MAX"}} {
		ph := phases[name]
		if ph == nil || ph.TracedGraphs == 0 {
			t.Errorf("no traced graph in phase %s: %+v", name, ph)
			continue
		}
		seen := map[string]bool{}
		for _, o := range ph.Ops {
			seen[o.Op] = true
		}
		for _, op := range ops {
			if !seen[op] {
				t.Errorf("phase %s has no %s among its ops: %v", name, op, opRows(ph))
			}
		}
	}
	if n := len(steps); phases["encode"].Decodes+phases["decode"].Decodes != int64(n) {
		t.Errorf("phases count %d and %d steps, the spans %d", phases["encode"].Decodes, phases["decode"].Decodes, n)
	}
	br := testbench.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	text := reportText(t, ctx, br, &summary.View{Processes: []*summary.Process{p}})
	for _, want := range []string{"Runtime: whisper.cpp", "Transcriptions: real-time factor, encoder and decoder",
		"Where an encoder pass's time goes", "Where a decoder pass's time goes"} {
		if !strings.Contains(text, want) {
			t.Errorf("report.html does not say %q", want)
		}
	}
}

// reportText renders v as report.html in the browser and returns the page's text, after
// checking it ran without a script error.
func reportText(t *testing.T, ctx context.Context, br *testbench.Browser, v *summary.View) string {
	t.Helper()
	v.Generated = time.Now()
	path := filepath.Join(t.TempDir(), "report.html")
	if err := page.WriteFile(path, v); err != nil {
		t.Fatal(err)
	}
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
	return testbench.Text(doc)
}

// whisper.cpp's Vulkan addon on lavapipe: the same application layer, each pass on a
// scheduler of two backends, and the copies of its inputs to the device (the mel
// spectrogram into the encoder, the tokens into the decoder) in their passes. The addon
// links GGML in, strips its symbol table and inlines ggml_backend_graph_compute_async
// into the scheduler, so its splits are not seen and its backends not named (README,
// Limitations): a copy's backends are unknown, never wrong.
func TestE2EWhisperVulkan(t *testing.T) {
	traces, metrics, _, r := whisperRun(t, testbench.Whisper{Model: "whisper-micro", Runs: 1, Threads: 2, Vulkan: true}, "")
	if r.GPU != "vulkan" {
		t.Fatalf("the driver ran on %v, want vulkan", r.GPU)
	}
	steps := checkTranscriptions(t, traces, metrics, 1)
	byID := map[string]span{}
	for _, s := range steps {
		if b := s.attrs["ggml.sched.backends"]; b != int64(2) {
			t.Errorf("%s on a scheduler of %v backends, want Vulkan's and the CPU's", s.name, b)
		}
		byID[s.id] = s
	}
	copied := map[string]bool{}
	for _, s := range spans(traces) {
		if s.name != "ggml.backend.tensor_copy" {
			continue
		}
		step, ok := byID[s.parent]
		if !ok {
			t.Errorf("copy of %v outside the passes", s.attrs["ggml.tensor.name"])
			continue
		}
		copied[fmt.Sprint(step.attrs["ggml.phase"], ":", s.attrs["ggml.tensor.name"])] = true
		for k, right := range map[string]string{"ggml.backend.source": backends.CPU, "ggml.backend.destination": "VULKAN"} {
			if v := s.attrs[k]; v != backends.Unknown && v != right {
				t.Errorf("copy of %v: %s %v, want %s or %s", s.attrs["ggml.tensor.name"], k, v, right, backends.Unknown)
			}
		}
	}
	for _, want := range []string{"encode:mel", "decode:embd", "decode:position"} {
		if !copied[want] {
			t.Errorf("no copy %s; copied %v", want, copied)
		}
	}
}

// llama.cpp inside one addon (@fugood/llama.node, which inlines llama_decode into its
// callers, and llama_memory_clear, and builds with GGML_MAX_NAME 80): profiled like a
// shared-library build. The driver loads the addon and waits to be attached before it
// loads the model, so llama.cpp's warm-up decode is seen: it is marked as the warm-up,
// and each of the two requests after it, the cache cleared before each (a call to the
// cache's own clear), has its prompt, tokens and times as the engine counts them.
func TestE2ELlamaNode(t *testing.T) {
	e := testbench.Require(t)
	e.RequireFugood(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startCollector(t, ctx, node, fullTracing)
	gate := filepath.Join(t.TempDir(), "go")
	proc, err := testbench.Start("env", append([]string{"WAIT_FILE=" + gate, node}, e.LlamaNodeArgs("llama-1b-q4_0", 8, 2, 2)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop()
	openGate(t, c, proc.PID(), gate) // env execs node
	if err := proc.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var r testbench.LlamaNodeResult
	if err := testbench.ParseLast(proc.Stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if !attachedWith(c, r.PID, `"runtime": "llama.cpp"`) {
		t.Errorf("the addon's process (pid %d) was not attached as llama.cpp:\n%s", r.PID, c.proc.Stderr.String())
	}
	traces, metrics := c.stop(t)
	checkProfile(t, traces, metrics, 16)
	res := traces[len(traces)-1].ResourceSpans().At(0).Resource().Attributes().AsRaw()
	for k, want := range map[string]any{"ggml.runtime": "llama.cpp", "ggml.version": "0.18.0", "llama.model.architecture": "llama",
		"llama.model.file_type": "Q4_0", "llama.context.size": int64(512), "llama.context.threads": int64(2)} {
		if res[k] != want {
			t.Errorf("resource %s = %v, want %v (the driver's context)", k, res[k], want)
		}
	}
	warmups := 0
	for _, s := range spans(traces) {
		if s.attrs["llama.request.warmup"] == true {
			warmups++
		}
	}
	reqs := requestsOf(traces, r.PID)
	if warmups != 1 || len(reqs) != 2 {
		t.Fatalf("%d requests and %d warm-ups, want the driver's two and llama.cpp's one", len(reqs), warmups)
	}
	// The engine does not count the token sampled from the prompt's logits among those it
	// predicted, nor its time: its prompt_ms is the time to the first token, and its
	// predicted_ms the time of the tokens after it. Its timings are the runs' sums.
	var ttft, after float64
	for _, req := range reqs {
		prompt, _ := req.attrs["llama.request.prompt_tokens"].(int64)
		generated, _ := req.attrs["gen_ai.usage.output_tokens"].(int64)
		if prompt != int64(r.Timings.PromptN/2) || generated != int64(r.Timings.PredictedN/2)+1 {
			t.Errorf("request of %d prompt tokens and %d generated; the engine counted %d and %d after the first in two", prompt, generated,
				r.Timings.PromptN, r.Timings.PredictedN)
		}
		first, _ := req.attrs["llama.request.time_to_first_token"].(float64)
		tpot, _ := req.attrs["llama.request.time_per_output_token"].(float64)
		ttft += first
		after += tpot * float64(generated-1)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.05*want+2e-3 }
	if !near(ttft, r.Timings.PromptMS/1e3) || !near(after, r.Timings.PredictedMS/1e3) {
		t.Errorf("times to first token %.4f s and after it %.4f s; the engine's %.4f s and %.4f s", ttft, after,
			r.Timings.PromptMS/1e3, r.Timings.PredictedMS/1e3)
	}
}

// ollamaChildren are the processes ollama serve pid started that still run, with their
// command lines.
func ollamaChildren(pid int) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
			out[child] = strings.ReplaceAll(string(cmd), "\x00", " ")
		}
	}
	return out
}

// runner waits for Ollama's runner for a model: its child whose command line names one.
func runner(t *testing.T, ctx context.Context, o *testbench.Ollama) int {
	t.Helper()
	for {
		for pid, cmd := range ollamaChildren(o.PID()) {
			if strings.Contains(cmd, "--model") {
				return pid
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("ollama serve started no runner: %s", o.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requestsOf are the request spans of process pid, in the order they ended, but its
// warm-up (llama.request.warmup): no client's.
func requestsOf(traces []ptrace.Traces, pid int) []span {
	var out []span
	for _, s := range spans(traces) {
		if s.pid == int64(pid) && s.attrs["gen_ai.operation.name"] != nil && s.attrs["llama.request.warmup"] != true {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.end, b.end) })
	return out
}

// checkOllamaTimings compares a request span with Ollama's answer: the prompt's tokens,
// the cached among them; its time to first token with Ollama's prompt_eval_duration (the
// prompt's evaluation, as its runner timed it), and its time per output token after the
// first with eval_duration over the tokens after the first (Ollama counts the token
// sampled from the prompt's logits among eval_count). Within 3% and 2 ms: the two clocks
// stop a few microseconds apart at each end.
func checkOllamaTimings(t *testing.T, what string, r span, o testbench.OllamaTimings) {
	t.Helper()
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.03*want+2e-3 }
	input, _ := r.attrs["gen_ai.usage.input_tokens"].(int64)
	output, _ := r.attrs["gen_ai.usage.output_tokens"].(int64)
	ttft, _ := r.attrs["llama.request.time_to_first_token"].(float64)
	tpot, _ := r.attrs["llama.request.time_per_output_token"].(float64)
	if input != int64(o.PromptEvalCount) || output != int64(o.EvalCount) {
		t.Errorf("%s: request of %d prompt and %d output tokens; Ollama answered %d and %d", what, input, output, o.PromptEvalCount, o.EvalCount)
	}
	// Ollama's prompt_eval_duration runs from its sequence's making (the request read,
	// its prompt tokenized) to its first token sampled; ours from the first decode's start
	// to the end of the decode that computed it. Ours is the shorter, by those steps, which
	// take less than one token's cycle (a fresh runner's first request: 5.0 ms of 86.7).
	tpotWant := float64(o.EvalDuration) / 1e9 / float64(o.EvalCount-1)
	if want := float64(o.PromptEvalDuration) / 1e9; ttft > want+0.03*want+2e-3 || want-ttft > tpotWant {
		t.Errorf("%s: time to first token %.4f s, Ollama's prompt_eval_duration %.4f s: want it no longer, and shorter by less than a token's %.4f s",
			what, ttft, want, tpotWant)
	}
	if want := tpotWant; !near(tpot, want) {
		t.Errorf("%s: time per output token %.4f s, Ollama's eval_duration over eval_count-1 %.4f s", what, tpot, want)
	}
	t.Logf("%s: TTFT %.1f ms (Ollama %.1f), TPOT %.1f ms (Ollama %.1f over %d)", what, ttft*1e3, float64(o.PromptEvalDuration)/1e6,
		tpot*1e3, float64(o.EvalDuration)/1e6/float64(o.EvalCount-1), o.EvalCount-1)
}

// ollamaServing starts a collector with settings and the test bench's Ollama (exe of
// the bench) with env, stopped at the test's end, and imports llama-1b-q4_0 as llama-1b.
func ollamaServing(t *testing.T, ctx context.Context, exe func(*testbench.Env) string, settings string, env ...string) (*collector, *testbench.Ollama) {
	t.Helper()
	e := testbench.Require(t)
	testbench.RequireOllama(t, exe(e))
	c := startCollectorOf(t, ctx, nil, settings)
	o, err := testbench.StartOllama(ctx, exe(e), t.TempDir(), env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	if err := o.Create(ctx, "llama-1b", e.Model("llama-1b-q4_0")); err != nil {
		t.Fatal(err)
	}
	return c, o
}

// Ollama as it ships (0.30 on), under the collector's default discovery (every process):
// its server and device discovery are let be without a word, each runner it starts is
// profiled from its first decode and named as Ollama names its model, through an unload
// and a reload, and requests through its three APIs match the timings it answers.
func TestE2EOllama(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, o := ollamaServing(t, ctx, (*testbench.Env).OllamaExe, "")
	gen, err := o.Generate(ctx, "llama-1b", "The capital of France is", 8, "")
	if err != nil {
		t.Fatal(err)
	}
	first := runner(t, ctx, o)
	chat, err := o.Chat(ctx, "llama-1b", "Hello, who are you?", 8)
	if err != nil {
		t.Fatal(err)
	}
	usage, err := o.OpenAIChat(ctx, "llama-1b", "Hello", 8)
	if err != nil {
		t.Fatal(err)
	}
	// Unloaded, the runner is killed; the next request loads the model in a new one.
	if _, err := o.Generate(ctx, "llama-1b", "", 0, "0"); err != nil {
		t.Fatal(err)
	}
	for ollamaChildren(o.PID())[first] != "" && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	again, err := o.Generate(ctx, "llama-1b", "Once upon a time", 8, "")
	if err != nil {
		t.Fatal(err)
	}
	second := runner(t, ctx, o)
	time.Sleep(2 * time.Second) // the requests' ends, and a collection interval
	log := c.proc.Stderr.String()
	for _, pid := range []int{first, second} {
		if !attachedWith(c, pid, `"runtime": "ollama"`) {
			t.Errorf("runner %d not attached as ollama:\n%s", pid, log)
		}
	}
	if n := strings.Count(log, "\tattached\t"); n != 2 {
		t.Errorf("%d processes attached, want Ollama's two runners alone:\n%s", n, log)
	}
	if strings.Contains(log, "\twarn\t") || strings.Contains(log, "\terror\t") {
		t.Errorf("the collector warned:\n%s", log)
	}
	traces, _ := c.stop(t)
	for _, rs := range traces {
		for i := 0; i < rs.ResourceSpans().Len(); i++ {
			res := rs.ResourceSpans().At(i).Resource().Attributes().AsRaw()
			path, _ := res["llama.model.path"].(string)
			if res["llama.model.name"] != "llama-1b:latest" || !strings.Contains(path, "/blobs/sha256-") || res["ggml.runtime"] != "ollama" {
				t.Fatalf("a runner's resource names its model %v (%v), runtime %v", res["llama.model.name"], res["llama.model.path"], res["ggml.runtime"])
			}
		}
	}
	// Each runner's warm-up comes before Ollama's first request, a request no client made.
	reqs := requestsOf(traces, first)
	if len(reqs) != 3 {
		t.Fatalf("%d requests of the first runner, want Ollama's three", len(reqs))
	}
	checkOllamaTimings(t, "/api/generate", reqs[0], gen)
	checkOllamaTimings(t, "/api/chat", reqs[1], chat)
	if in, out := reqs[2].attrs["gen_ai.usage.input_tokens"], reqs[2].attrs["gen_ai.usage.output_tokens"]; in != int64(usage.PromptTokens) || out != int64(usage.CompletionTokens) {
		t.Errorf("/v1/chat/completions: request of %v prompt and %v output tokens, Ollama's usage %+v", in, out, usage)
	}
	reqs = requestsOf(traces, second)
	if len(reqs) != 1 {
		t.Fatalf("%d requests of the reloaded runner, want Ollama's one", len(reqs))
	}
	checkOllamaTimings(t, "/api/generate after a reload", reqs[0], again)
}

// Ollama before 0.30 on its own Go engine, which computes through cgo with no
// llama_decode: its runner's forward batches are steps (ollama.forward) by phase,
// holding graphs and nodes, the prompt's batch with the prompt's tokens; no warning.
func TestE2EOllamaEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, o := ollamaServing(t, ctx, (*testbench.Env).OllamaOldExe, fullTracing, "OLLAMA_NEW_ENGINE=1")
	gen, err := o.Generate(ctx, "llama-1b", "The capital of France is", 4, "")
	if err != nil {
		t.Fatal(err)
	}
	pid := runner(t, ctx, o)
	if cmd := ollamaChildren(o.PID())[pid]; !strings.Contains(cmd, "--ollama-engine") {
		t.Fatalf("the runner is not Ollama's engine: %s", cmd)
	}
	time.Sleep(2 * time.Second)
	log := c.proc.Stderr.String()
	if !attachedWith(c, pid, `"runtime": "ollama"`) || strings.Count(log, "\tattached\t") != 1 {
		t.Errorf("want the runner (pid %d) alone attached, as ollama:\n%s", pid, log)
	}
	if strings.Contains(log, "\twarn\t") || strings.Contains(log, "\terror\t") {
		t.Errorf("the collector warned:\n%s", log)
	}
	traces, _ := c.stop(t)
	all := spans(traces)
	children := map[string][]span{}
	var batches []span
	for _, s := range all {
		children[s.parent] = append(children[s.parent], s)
		if s.name == "ollama.forward" {
			batches = append(batches, s)
		}
	}
	// The runner computes one batch ahead: a request of n tokens computes n+1 batches, the
	// last after its answer.
	if len(batches) < gen.EvalCount {
		t.Fatalf("%d ollama.forward spans, want the prompt's and a batch for each token after the first (Ollama: %+v)", len(batches), gen)
	}
	slices.SortFunc(batches, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	if b := batches[0]; b.attrs["ggml.phase"] != "prefill" || b.attrs["ggml.step.tokens"] != int64(gen.PromptEvalCount) {
		t.Errorf("the first batch: %v, want the prompt's %d tokens", b.attrs, gen.PromptEvalCount)
	}
	nodes := 0
	for _, b := range batches[1:] {
		if b.attrs["ggml.phase"] != "decode" || b.attrs["ggml.step.tokens"] != int64(1) {
			t.Errorf("a batch after the first: %v, want one token", b.attrs)
		}
		for _, split := range children[b.id] {
			for _, g := range children[split.id] {
				nodes += len(children[g.id])
			}
		}
	}
	if nodes == 0 {
		t.Error("no node spans in the decode batches")
	}
	res := traces[0].ResourceSpans().At(0).Resource().Attributes().AsRaw()
	if res["ggml.runtime"] != "ollama" || res["llama.model.name"] != "llama-1b:latest" {
		t.Errorf("resource: runtime %v, model %v", res["ggml.runtime"], res["llama.model.name"])
	}
}
