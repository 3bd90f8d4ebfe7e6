package advise

import (
	"fmt"
	"strings"

	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// The prompt cache: a server keeps each slot's tokens in the KV cache, and a request
// whose prompt starts as the slot's cached tokens do computes only the rest. One that
// computes a start an earlier request computed paid for its prefill twice.

var recomputedRule = Rule{
	ID:    "prompt-recomputed",
	Name:  "prompt cache not reused",
	Reads: []string{schema.LlamaRequestPromptPrefixHash, schema.LlamaRequestPromptTokens, schema.LlamaRequestEnd},
	Fires: "{recomputedMin} requests or more computed their prompt's first {prefixTokens} where an earlier request of the process had computed the same, the cache not cleared between them: " +
		"information, a warning from {recomputedWarn} of prefill a request recomputed (from {recomputedWarnTokens} where prefill's rate is not known)",
	Says:       "how many requests computed a prompt start again, the tokens the earlier requests held that they recomputed, what it cost their time to first token, and why a server does it in its own words: `cache_prompt` off, the request sent to another slot (`id_slot`, more slots than conversations), the prompt's start changed (a timestamp early in the system prompt), `--cache-reuse`; for Ollama, `keep_alive` and `OLLAMA_NUM_PARALLEL`",
	Thresholds: []*Threshold{recomputedMin, recomputedWarn, recomputedWarnTokens, prefixTokens},
	apply:      recomputedPrompts,
}

// Thresholds of the prompt-recomputed rule.
var (
	prefixTokens = &Threshold{Name: "prefixTokens", Value: events.PrefixTokens, Unit: Tokens,
		Why: "How much of a prompt's start the probe hashes (events.PrefixTokens): a system prompt and a conversation's first turn are longer, and two different prompts rarely share as much. Tokens, whatever the CPU."}
	recomputedMin = &Threshold{Name: "recomputedMin", Value: 2, Unit: Number,
		Why: "The requests that must have recomputed a start: one alone may be a conversation picked up after another filled its slot. A count of requests, whatever the CPU."}
	recomputedWarn = &Threshold{Name: "recomputedWarn", Value: 0.5, Unit: Seconds,
		Why: "The prefill a request on average computed again from which the finding is a warning: a wait a user sees before the first token, on any CPU. It is read at this run's prefill rate, so a faster CPU needs more tokens recomputed to reach it."}
	recomputedWarnTokens = &Threshold{Name: "recomputedWarnTokens", Value: 256, Unit: Tokens,
		Why: "Where prefill's rate is not known (no prefill decode seen), the tokens a request on average computed again from which the finding is a warning: a prompt's start as long as a system prompt and a turn or two. " +
			"A count of tokens stands for the wait only roughly, since what they cost follows the CPU's speed; where the rate is known, recomputedWarn judges by it instead."}
)

// cacheAdvice says in p's runtime's words what keeps a prompt's start in the cache.
func cacheAdvice(p *summary.Process) string {
	switch {
	case p.Runtime == "ollama":
		return "Ollama reuses a runner's cache for a prompt that starts as a slot's last one did: keep the model loaded (`keep_alive`), and as many slots (`OLLAMA_NUM_PARALLEL`) as conversations at once, so that each finds its own; keep the start of the prompt the same from turn to turn (no timestamp in the system prompt)."
	case strings.HasPrefix(executable(p), "llama-server"):
		return "llama-server reuses a slot's cache for the prompt start it shares with the slot's last one: keep `cache_prompt` on (a request field, on by default in recent builds), send a conversation's turns to the same slot (`id_slot`) with as many slots (`-np`) as conversations at once, and keep the start of the prompt the same from turn to turn (no timestamp in the system prompt); `--cache-reuse N` also reuses chunks past a change."
	}
	return "Keep each conversation's tokens in its own sequence of the KV cache and decode only what follows them: remove from the sequence (llama_memory_seq_rm) only the positions past the part of the prompt that is the same, and keep the start of the prompt the same from turn to turn."
}

// recomputedPrompts: requests that computed again a prompt start the cache had held.
func recomputedPrompts(p *summary.Process) (summary.Finding, bool) {
	r := p.Requests
	if r == nil || float64(r.Recomputed) < recomputedMin.Value {
		return summary.Finding{}, false
	}
	each := float64(r.RecomputedTokens) / float64(r.Recomputed)
	f := summary.Finding{Severity: summary.Info,
		Title: fmt.Sprintf("%d of %d requests computed again a prompt start an earlier request had computed", r.Recomputed, r.Count),
		Advice: "A request whose prompt starts as an earlier one's computed that start again, when the runtime could have kept it in its KV cache and computed only what follows. " +
			cacheAdvice(p),
		Evidence: []string{fmt.Sprintf("%d requests computed their prompt's first 64 tokens where an earlier request of the process had computed the same; the earlier requests held %.0f tokens of their prompts on average", r.Recomputed, each)},
	}
	if ph := seen(p, "prefill"); ph != nil && ph.Tokens > 0 && ph.DecodeSeconds > 0 {
		perToken := 1e3 * ph.DecodeSeconds / float64(ph.Tokens)
		if perToken*each/1e3 >= recomputedWarn.Value {
			f.Severity = summary.Warning
		}
		saved := perToken * float64(r.RecomputedTokens) / 1e3
		f.Evidence = append(f.Evidence, fmt.Sprintf("at prefill's %.2f ms a token, some %.0f ms of time to first token for each", perToken, perToken*each))
		f.Gain = &summary.Gain{Phase: "prefill", From: perToken, To: perToken * (1 - min(float64(r.RecomputedTokens)/float64(ph.Tokens), 1)), Saved: saved,
			Assumes: "each request's prompt held all of the earlier request's tokens (a conversation's next turn), and each token recomputed cost prefill's mean time a token"}
	} else if each >= recomputedWarnTokens.Value {
		f.Severity = summary.Warning
	}
	return f, true
}
