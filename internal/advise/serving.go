package advise

import (
	"fmt"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Serving: a server computes its slots' next tokens in one decode, and a new request's
// prompt beside them. What that costs the generating requests, what the steps of several
// sequences buy against steps of one, and requests that ran out of context.

var stallRule = Rule{
	ID:    "prompts-stall",
	Name:  "prompts stall generation",
	Reads: []string{schema.LlamaRequestTimePerOutputTokenMedian, schema.LlamaRequestTimePerOutputTokenMax, schema.LlamaRequestGapMaxPromptTokens, schema.LlamaRequestPromptStall},
	Fires: "{stallMin} requests or more had their longest gap between output tokens {stallRatio} their median gap or more, with other requests' prompts computed in it; " +
		"information, a warning from {stallWarn} a stalled request waited for other prompts on average",
	Says:       "how many requests stalled, their median and longest gaps, the prompt tokens computed in those gaps and the time generation waited for them, and the settings that trade it in the runtime's words: a prompt's chunk a decode (`-b`, `num_batch`), fewer slots, long prompts to another replica",
	Thresholds: []*Threshold{stallMin, stallRatio, stallWarn},
	apply:      promptStalls,
}

// Thresholds of the prompts-stall rule.
var (
	stallMin = &Threshold{Name: "stallMin", Value: 2, Unit: Number,
		Why: "The requests that must have stalled: one prompt arriving mid-stream is a server's ordinary life. A count of requests, whatever the CPU."}
	stallRatio = &Threshold{Name: "stallRatio", Value: summary.StallRatio, Unit: Ratio,
		Why: "How many times its median gap a request's longest gap between output tokens is, from which it counts as stalled (summary.StallRatio, which counts the requests): a server's steps vary by a few tens of percent as slots come and go; a prompt computed between two tokens takes many steps' time. " +
			"A ratio to the same request's gaps, which a faster or slower CPU scales alike."}
	stallWarn = &Threshold{Name: "stallWarn", Value: 0.5, Unit: Seconds,
		Why: "The time a stalled request's generation waited for other requests' prompts, on average, from which the finding is a warning: a pause a reader of a stream sees, on any CPU."}
)

// chunkOption names, in p's runtime's words, the most prompt tokens a decode computes.
func chunkOption(p *summary.Process) string {
	switch {
	case p.Runtime == "ollama":
		return "num_batch (PARAMETER num_batch in the Modelfile, or options.num_batch; Ollama passes it as llama-server's -b and -ub)"
	case strings.HasPrefix(executable(p), "llama-server"):
		return "-b (--batch-size, 2048 by default; with -ub no larger)"
	}
	return "n_batch (the most prompt tokens the application puts in one llama_decode)"
}

// promptStalls: generating requests waited for other requests' prompts.
func promptStalls(p *summary.Process) (summary.Finding, bool) {
	r := p.Requests
	if r == nil || float64(r.Stalled) < stallMin.Value {
		return summary.Finding{}, false
	}
	wait := r.StallSeconds / float64(r.Stalled)
	f := summary.Finding{Severity: summary.Info,
		Title: fmt.Sprintf("%d of %d requests stalled mid-generation while other requests' prompts were computed: their longest gap %.0f ms against %.0f ms between tokens",
			r.Stalled, r.GapMedian.Count, r.GapMax.P50, r.GapMedian.P50),
		Advice: "The server computes a new request's prompt in the same decodes as the generating requests' next tokens, a chunk of it a decode, so each generating request waits for the whole chunk before its next token. " +
			fmt.Sprintf("A smaller chunk, %s, spreads a long prompt over more, shorter decodes: the generating requests' longest gaps shrink with it, and the prompt takes a little longer. ", chunkOption(p)) +
			"Fewer slots compute fewer prompts beside the generation; long prompts sent to another replica stall none of it.",
		Evidence: []string{
			fmt.Sprintf("%d requests' longest gap between output tokens was %.0f× their median or more, with %d prompt tokens of other requests computed in those gaps", r.Stalled, stallRatio.Value, r.StallPrompts),
			fmt.Sprintf("over %d requests that generated: the median gap p50 %.1f ms; the longest p50 %.1f ms, p90 %.1f ms, at most %.1f ms", r.GapMedian.Count, r.GapMedian.P50, r.GapMax.P50, r.GapMax.P90, r.GapMax.Max),
			fmt.Sprintf("generation waited %.2f s in all for other requests' prompts, beyond its median pace (llama.request.prompt_stall), over %d output tokens", r.StallSeconds, r.StallOutput),
		},
	}
	if m := seen(p, "mixed"); m != nil && m.Decodes > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d mixed decodes computed %d prompt tokens beside %d next tokens, %.0f ms each on average, up to %d tokens in one",
			m.Decodes, m.PromptTokens, m.NextTokens, 1e3*m.DecodeSeconds/float64(m.Decodes), m.MaxBatch))
	}
	f.Evidence = append(f.Evidence, "gain not estimated: the prompts still take their time, spread over more decodes; run with a smaller chunk and compare the requests' longest gaps (profinfer compare)")
	if wait >= stallWarn.Value {
		f.Severity = summary.Warning
	}
	return f, true
}

var batchingRule = Rule{
	ID:         "batching-little",
	Name:       "batching buys little",
	Reads:      []string{schema.SpanDecode, schema.LlamaBatchNextSequences},
	Fires:      "decode steps of N ≥ 2 sequences ({batchSteps} or more, beside {batchOne} or more steps of one) computed {batchGainMax} a single sequence's tokens a second or less at the median; information",
	Says:       "the cost of a step of each width against a step of one, what the wider steps bought where some did, and what llama.cpp's CPU matmuls do below four sequences; where steps of four or more bought little too, that the CPU's compute bounds them, with the decode matmuls' roofs",
	Thresholds: []*Threshold{batchSteps, batchOne, batchGainMax},
	apply:      batchingLittle,
}

// Thresholds of the batching-little rule.
var (
	batchSteps = &Threshold{Name: "batchSteps", Value: 16, Unit: Number,
		Why: "The steps of a width a comparison needs: a median of them, not a moment. A count of steps, whatever the CPU."}
	batchOne = &Threshold{Name: "batchOne", Value: 8, Unit: Number,
		Why: "The steps of one sequence a comparison needs, the yardstick of every width: a median of them, not a moment. A count of steps, whatever the CPU."}
	batchGainMax = &Threshold{Name: "batchGainMax", Value: 4.0 / 3, Unit: Ratio,
		Why: "The most tokens a second, over a single sequence's, a width's steps may compute and still have bought little: a step of N sequences at 75% of N steps of one or more (two sequences in 1.5× a step of one, three in 2.25×). " +
			"A step that reads its weights once for all its sequences, where the weights' reading dominates, costs little more than one: on the test bench, steps of 4 computed 2.1-2.2× a single sequence's tokens, those of 2 and 3 (a sequence at a time) 1.06-1.19×. " +
			"A ratio of the same run's steps: the CPU's speed scales both, and where its compute rather than its memory bounds the steps, wider ones do buy little, as the finding says."}
)

// batchingLittle: steps of several sequences cost about as much as as many steps of one.
func batchingLittle(p *summary.Process) (summary.Finding, bool) {
	dec := seen(p, "decode")
	if dec == nil || len(dec.Widths) < 2 || dec.Widths[0].Width != "1" || float64(dec.Widths[0].Steps) < batchOne.Value {
		return summary.Finding{}, false
	}
	one := dec.Widths[0]
	var little, paid []summary.Width
	for _, w := range dec.Widths[1:] {
		if float64(w.Steps) < batchSteps.Value || w.Cost == 0 {
			continue
		}
		if w.Gain <= batchGainMax.Value {
			little = append(little, w)
		} else {
			paid = append(paid, w)
		}
	}
	if len(little) == 0 {
		return summary.Finding{}, false
	}
	w := little[0]
	f := summary.Finding{Severity: summary.Info,
		Title: fmt.Sprintf("Decode steps of %s sequences cost %.2f× a step of one: %.2f× its tokens a second", w.Width, w.Cost, w.Gain),
		Advice: "Computing several sequences in one decode pays where the step reads the model's weights once for all of them; here the steps of these widths cost about as many steps of one, so each request's tokens come slower and the server computes few more. " +
			"llama.cpp's CPU backend computes the matmuls of weights it repacked for the CPU (Q4_0, IQ4_NL and the like, on x86 and Arm) a sequence at a time below 4 sequences, reading every weight again for each, and 4 at a time from there. " +
			"Where the slots are usually 2 or 3 busy, 4 or more slots (`--parallel`) let the steps reach the widths that share the weights' reading; where the latency of each request matters more than the total, fewer slots make each faster.",
		Evidence: []string{fmt.Sprintf("steps of one sequence: %d, %.1f ms at the median", one.Steps, one.StepMS.P50)},
	}
	// Steps that share the weights' reading and still buy little: the CPU's compute
	// bounds them (narrower vectors, fewer cores), and more slots will not help.
	wide := slices.ContainsFunc(little, func(x summary.Width) bool { return x.Sequences >= 4 })
	if wide {
		f.Advice = "Computing several sequences in one decode pays where the step reads the model's weights once for all of them, as llama.cpp's CPU backend does from 4 sequences a step; here steps of 4 or more still cost about as many steps of one, so the CPU's compute, not the weights' reading, bounds them. " +
			"More slots (`--parallel`) add few tokens a second on this CPU and make each request's come slower; where the latency of each request matters more than the total, fewer slots make each faster."
	}
	for _, x := range little {
		f.Evidence = append(f.Evidence, fmt.Sprintf("steps of %s sequences: %d, %.1f ms at the median, %.2f× a step of one for %.1f sequences: %.2f× the tokens a second", x.Width, x.Steps, x.StepMS.P50, x.Cost, x.Sequences, x.Gain))
	}
	for _, x := range paid {
		f.Evidence = append(f.Evidence, fmt.Sprintf("steps of %s sequences paid: %d, %.2f× a step of one for %.1f sequences, %.2f× the tokens a second", x.Width, x.Steps, x.Cost, x.Sequences, x.Gain))
	}
	// The op table's verdicts, where its graphs showed the matmuls against the compute
	// roof (it samples graphs of every width, most of one sequence where those are most).
	for _, o := range dec.Ops {
		if wide && o.Op == "MUL_MAT" && o.PeakFrac > 0 && o.Roof == summary.BoundCompute {
			f.Evidence = append(f.Evidence, fmt.Sprintf("decode's MUL_MAT %s: %s of its graphs' time at %s of its roof (compute-bound)", o.Weight, pct(o.Share), pct(o.PeakFrac)))
		}
	}
	f.Evidence = append(f.Evidence, "gain not estimated: what another width computes depends on the kernels the build picks for it; the table of steps by width shows each one measured")
	return f, true
}

var contextRule = Rule{
	ID:    "context-full",
	Name:  "requests reach the context",
	Reads: []string{schema.LlamaRequestContextFull, schema.LlamaRequestContextShifts, schema.LlamaRequestKVCells, schema.LlamaContextSeqSize},
	Fires: "a request's sequence reached the KV cells one sequence may hold: the server stopped it there (llama-server's `truncated`) or shifted its context; a warning where one was cut, information where the context was shifted",
	Says:  "how many requests reached the context and what the server did, the cells a sequence may hold against the context and its slots, and the settings in the runtime's words (`-c`, `--parallel`, `--kv-unified`, `--context-shift`; `num_ctx`)",
	apply: contextFull,
}

// contextAdvice says in p's runtime's words how its sequences get more cells.
func contextAdvice(p *summary.Process, s *summary.Serving) string {
	switch {
	case p.Runtime == "ollama":
		return "Ollama gives each slot the model's context, num_ctx (PARAMETER num_ctx, or options.num_ctx; it starts llama-server with num_ctx × OLLAMA_NUM_PARALLEL cells): raise num_ctx where memory allows, or send shorter prompts."
	case strings.HasPrefix(executable(p), "llama-server"):
		share := ""
		if s != nil && s.Slots > 1 && s.SeqContext > 0 && s.SeqContext < s.Context {
			share = fmt.Sprintf(" Its %d cells (-c) are split between %d slots, %d each: `--kv-unified` lets every slot use the whole cache, as long as the slots' sum fits; fewer `--parallel` slots give each more.", s.Context, s.Slots, s.SeqContext)
		}
		return "llama-server stops a generation whose slot is full (the response's `truncated`), unless `--context-shift` drops the oldest half of its tokens, which the model then no longer sees. Raise `-c` where memory allows." + share
	}
	return "The application ran a sequence to the end of its context (n_ctx, or n_ctx_seq of it a sequence): a larger context where memory allows, or shorter prompts and outputs."
}

// contextFull: requests ran out of the cells their sequence may hold.
func contextFull(p *summary.Process) (summary.Finding, bool) {
	r := p.Requests
	if r == nil || r.Full == 0 {
		return summary.Finding{}, false
	}
	s := p.Serving
	what := fmt.Sprintf("the server shifted their context %d times", r.Shifts)
	sev := summary.Info
	if r.Truncated > 0 {
		what = fmt.Sprintf("%d were cut there", r.Truncated)
		if r.Shifts > 0 {
			what += fmt.Sprintf(", and the context of the others shifted %d times", r.Shifts)
		}
		sev = summary.Warning
	}
	f := summary.Finding{Severity: sev,
		Title:    fmt.Sprintf("%d of %d requests reached the end of their context: %s", r.Full, r.Count, what),
		Advice:   contextAdvice(p, s),
		Evidence: []string{fmt.Sprintf("the longest sequence held %d KV cells", r.MaxCells)},
	}
	if s != nil && s.SeqContext > 0 {
		slots := ""
		if s.Slots > 1 {
			slots = fmt.Sprintf(", in %d slots", s.Slots)
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("one sequence may hold %d cells of the context's %d%s (llama.context.seq_size, llama.context.size)", s.SeqContext, s.Context, slots))
	}
	if s != nil && s.KVCells > 0 && s.Context > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the sequences held at most %d of the %d cells at once", s.KVCells, s.Context))
	}
	f.Evidence = append(f.Evidence, "gain not estimated: a request cut short or shifted loses output or context, not time")
	return f, true
}
