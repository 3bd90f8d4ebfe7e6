package summary

import (
	"cmp"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
)

func (a *Aggregator) decode(p *proc, s ptrace.Span) {
	attrs := s.Attributes()
	name := schema.Str(attrs, schema.LlamaPhase)
	if name != prefill && name != decode && name != mixed {
		name = decode
	}
	tokens := schema.Int(attrs, schema.LlamaBatchTokens)
	a.phases.put(s.TraceID(), name, tokens, int64(s.StartTimestamp()), int64(s.EndTimestamp()))
	p.addStep(s, name, tokens)
	p.serving(s, name, tokens)
}

// addStep counts step s (a llama_decode, or a runtime's other step) of tokens into phase
// name: its calls, tokens and time, its latency where it decodes one token, and the
// tokens per second of prefill and decode. A step the process ended inside computed no
// token: its graphs count in its phase, it does not.
func (p *proc) addStep(s ptrace.Span, name string, tokens int64) {
	if schema.Bool(s.Attributes(), schema.ProfinferCut) {
		p.cut = true
		return
	}
	ph := p.phase(name)
	ph.Decodes++
	ph.Tokens += tokens
	ph.MaxBatch = max(ph.MaxBatch, tokens)
	if u := schema.Int(s.Attributes(), schema.LlamaContextUbatchSize); u > 0 && (ph.Ubatch == 0 || u < ph.Ubatch) {
		ph.Ubatch = u
	}
	ph.DecodeSeconds += schema.Seconds(s)
	if name == decode {
		p.latency.add(schema.Seconds(s))
	}
	if tokens > 0 && (name == prefill || name == decode) {
		p.addRate(s.EndTimestamp().AsTime().Unix(), name, tokens)
	}
}

// ggmlLayer are the spans of the GGML layer, which every runtime's steps hold.
var ggmlLayer = map[string]bool{schema.SpanGraph: true, schema.SpanSplit: true,
	schema.SpanDevice: true, schema.SpanCopy: true}

// isStep says whether s is a step of a runtime without llama_decode (whisper.encode,
// ollama.forward, a scheduler's computation of no known runtime): the spans that carry
// a phase, but the GGML layer's inside them.
func isStep(s ptrace.Span) bool {
	_, ok := s.Attributes().Get(schema.GGMLPhase)
	return ok && !ggmlLayer[s.Name()]
}

// step folds a step of a runtime without llama_decode into its phase, as decode a
// llama_decode: its graphs carry the phase themselves, as steps of one whisper
// transcription share a trace.
func (a *Aggregator) step(p *proc, s ptrace.Span) {
	attrs := s.Attributes()
	p.addStep(s, cmp.Or(schema.Str(attrs, schema.GGMLPhase), compute), schema.Int(attrs, schema.GGMLStepTokens))
}

// phaseOf returns the phase and tokens of the step span s is inside: its own ggml.phase,
// else its trace's llama_decode's.
func (a *Aggregator) phaseOf(s ptrace.Span) (string, int64) {
	if v, ok := s.Attributes().Get(schema.GGMLPhase); ok {
		return v.Str(), 0
	}
	return a.phases.get(s.TraceID())
}

// job sums a whisper transcription's span.
func (p *proc) job(s ptrace.Span) {
	attrs := s.Attributes()
	j := &p.jobs
	j.Count++
	audio := schema.Float(attrs, schema.WhisperAudioSeconds)
	j.AudioSeconds += audio
	j.Seconds += schema.Seconds(s)
	if audio > 0 {
		p.rtf.add(schema.Seconds(s) / audio)
	}
	j.EncodePasses += schema.Int(attrs, schema.WhisperEncodePasses)
	j.EncodeSeconds += schema.Float(attrs, schema.WhisperEncodeSeconds)
	j.DecodePasses += schema.Int(attrs, schema.WhisperDecodePasses)
	j.DecodeSeconds += schema.Float(attrs, schema.WhisperDecodeSeconds)
}

// request sums a request span, but llama.cpp's warm-up at load, which no client asked for.
func (p *proc) request(s ptrace.Span) {
	attrs := s.Attributes()
	if schema.Bool(attrs, schema.LlamaRequestWarmup) {
		p.requests.WarmupTokens += schema.Int(attrs, schema.LlamaRequestPromptTokens)
		return
	}
	r := &p.requests
	r.Count++
	r.Input += schema.Int(attrs, schema.LlamaRequestPromptTokens)
	r.Cached += schema.Int(attrs, schema.GenAIUsageCacheReadInputTokens)
	r.Output += schema.Int(attrs, schema.GenAIUsageOutputTokens)
	r.MaxShared = max(r.MaxShared, schema.Int(attrs, schema.LlamaRequestSharedSequencesMax))
	if v, ok := attrs.Get(schema.LlamaRequestPromptPrefixHash); ok {
		p.prefix(v.Int(), schema.Int(attrs, schema.LlamaRequestPromptTokens), computed{
			tokens:  schema.Int(attrs, schema.GenAIUsageInputTokens) + schema.Int(attrs, schema.GenAIUsageOutputTokens),
			cleared: schema.Str(attrs, schema.LlamaRequestEnd) == "cleared"})
	}
	var ttft float64
	if v, ok := attrs.Get(schema.LlamaRequestTimeToFirstToken); ok {
		ttft = v.Double()
		p.ttft.add(ttft)
	}
	if v, ok := attrs.Get(schema.LlamaRequestWait); ok {
		wait := v.Double()
		p.wait.add(wait)
		if wait >= QueuedWait && schema.Bool(attrs, schema.LlamaRequestQueued) {
			r.Queued++
			r.QueuedWait += wait
			r.QueuedTTFT += ttft
		}
	}
	if v, ok := attrs.Get(schema.LlamaRequestTimePerOutputToken); ok {
		p.tpot.add(v.Double())
	}
	p.requestServing(s)
}

// requestServing folds what request span s says of its gaps, its time by share and its
// context.
func (p *proc) requestServing(s ptrace.Span) {
	attrs := s.Attributes()
	r := &p.requests
	if v, ok := attrs.Get(schema.LlamaRequestTimePerOutputTokenMedian); ok {
		median, worst := v.Double(), schema.Float(attrs, schema.LlamaRequestTimePerOutputTokenMax)
		p.gapMedian.add(median)
		p.gapMax.add(worst)
		prompts := schema.Int(attrs, schema.LlamaRequestGapMaxPromptTokens)
		if median > 0 && worst >= StallRatio*median && prompts > 0 {
			r.Stalled++
			r.StallPrompts += prompts
		}
		if stall := schema.Float(attrs, schema.LlamaRequestPromptStall); stall > 0 {
			r.StallSeconds += stall
			r.StallOutput += schema.Int(attrs, schema.GenAIUsageOutputTokens)
		}
	}
	if _, ok := attrs.Get(schema.LlamaRequestTimePrefix + "prompt"); ok {
		if r.Time == nil {
			for _, name := range TimeShares {
				r.Time = append(r.Time, TimeShare{Name: name})
			}
		}
		wait := schema.Float(attrs, schema.LlamaRequestWait)
		r.Time[0].Seconds += wait
		for i := 1; i < len(r.Time); i++ {
			r.Time[i].Seconds += schema.Float(attrs, schema.LlamaRequestTimePrefix+r.Time[i].Name)
		}
		r.Latency += wait + schema.Seconds(s)
	}
	r.MaxCells = max(r.MaxCells, schema.Int(attrs, schema.LlamaRequestKVCells))
	shifts := schema.Int(attrs, schema.LlamaRequestContextShifts)
	r.Shifts += shifts
	if schema.Bool(attrs, schema.LlamaRequestContextFull) {
		r.Full++
		if shifts == 0 {
			r.Truncated++
		}
	}
}

// computed is a request that computed a prompt's start: the tokens it held (prompt and
// output), and whether it ended with the cache cleared.
type computed struct {
	tokens  int64
	cleared bool
}

// prefix notes request req, which computed its prompt's start, hash, and prompt tokens of
// its own: where an earlier request computed the same start, the runtime computed it
// again, and could have reused as much of it as this prompt shares with the earlier
// request's tokens, taken to be all of them (a conversation's next turn repeats the last
// one's prompt and answer). Not where the earlier one ended with the cache cleared: the
// application dropped it (llama-bench, between its repetitions).
func (p *proc) prefix(hash, prompt int64, req computed) {
	r := &p.requests
	if earlier, ok := p.prefixes[hash]; ok && !earlier.cleared {
		r.Recomputed++
		r.RecomputedTokens += min(prompt, earlier.tokens)
	}
	if p.prefixes == nil || len(p.prefixes) >= maxPrefixes {
		p.prefixes = map[int64]computed{}
	}
	p.prefixes[hash] = req
}

// maxPrefixes bounds the prompt starts a process's fold keeps.
const maxPrefixes = 4096

func (p *proc) addRate(sec int64, name string, tokens int64) {
	i := p.rateAt(sec)
	if i < 0 {
		return
	}
	if name == prefill {
		p.rate[i].Prefill += tokens
	} else {
		p.rate[i].Decode += tokens
	}
}

// rateAt returns the index of second sec in p.rate, which it adds where it is missing;
// -1 for a second before those kept.
func (p *proc) rateAt(sec int64) int {
	if n := len(p.rate); n == 0 || p.rate[n-1].Time < sec {
		p.rate = append(p.rate, Rate{Time: sec})
		if len(p.rate) > rateSeconds {
			p.rate = slices.Delete(p.rate, 0, len(p.rate)-rateSeconds)
		}
	}
	// Late batches land in their own second, or are dropped past the window.
	i, found := slices.BinarySearchFunc(p.rate, sec, func(r Rate, t int64) int { return cmp.Compare(r.Time, t) })
	if !found {
		if i == 0 && len(p.rate) >= rateSeconds {
			return -1
		}
		p.rate = slices.Insert(p.rate, i, Rate{Time: sec})
	}
	return i
}

// Steps names a runtime's steps, plural: llama.cpp's decodes, whisper.cpp's passes.
func Steps(runtime string) string {
	switch runtime {
	case "whisper.cpp":
		return "passes"
	case "ggml":
		return "scheduler computations"
	}
	return "decodes"
}

// exit notes how p ended, from its process span s.
func (p *proc) exit(s ptrace.Span) {
	for i := 0; i < s.Events().Len(); i++ {
		ev := s.Events().At(i)
		if ev.Name() != schema.EventProcessExit {
			continue
		}
		a := ev.Attributes()
		e := &End{At: ev.Timestamp().AsTime().UTC(), Cause: schema.Str(a, schema.ProfinferExitCause),
			Failed: s.Status().Code() == ptrace.StatusCodeError,
			OOM:    schema.Str(a, schema.ProfinferExitOOMKiller), Cgroup: schema.Str(a, schema.ProfinferExitCgroup),
			Limit: schema.Int(a, schema.ProfinferExitMemoryLimit), Usage: schema.Int(a, schema.ProfinferExitMemoryUsage),
			Peak: schema.Int(a, schema.ProfinferExitMemoryPeak), Graphs: schema.Int(a, schema.ProfinferExitGraphs),
			Steps: schema.Int(a, schema.ProfinferExitSteps)}
		p.end = e
	}
}

// text is e's line: "killed by SIGKILL: …; 3 graphs computed and 0 decodes completed
// while traced, and the one in progress cut short".
func (e *End) text(runtime string) string {
	graphs := "graphs"
	if e.Graphs == 1 {
		graphs = "graph"
	}
	t := fmt.Sprintf("%s; %d %s computed and %d %s completed while traced", e.Cause, e.Graphs, graphs, e.Steps, Steps(runtime))
	if e.Cut {
		t += ", and the one in progress cut short"
	}
	return t
}
