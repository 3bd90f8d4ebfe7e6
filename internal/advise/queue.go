package advise

import (
	"fmt"
	"strings"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Slots: a server computes as many requests at once as it has slots (llama-server's
// `--parallel`, Ollama's OLLAMA_NUM_PARALLEL); the others wait, and their wait is time
// to first token that no faster kernel wins back.

var queuedRule = Rule{
	ID:    "requests-queued",
	Name:  "requests wait for a slot",
	Reads: []string{schema.LlamaRequestWait, schema.LlamaRequestQueued},
	Fires: "{queuedMin} requests or more waited {queuedWait} or more between reaching the server (the first bytes their connection received after its last answer) and their first decode (the connections layer), " +
		"for a slot: the request before each on its sequence was still computing when it came; information, a warning from {queuedWarn} on average",
	Says:       "how many requests waited, how long, against their time to first token once computing, and how many sequences the server computed at once; the change in the runtime's words: more slots (`--parallel`/`-np`, with the context each gets; `OLLAMA_NUM_PARALLEL`), or another replica where every slot was busy",
	Thresholds: []*Threshold{queuedMin, queuedWait, queuedWarn},
	apply:      queuedRequests,
}

// Thresholds of the requests-queued rule.
var (
	queuedMin = &Threshold{Name: "queuedMin", Value: 2, Unit: Number,
		Why: "The requests that must have waited: one may have come as the server finished loading, or met another's long prompt once. A count of requests, whatever the CPU."}
	queuedWait = &Threshold{Name: "queuedWait", Value: summary.QueuedWait, Unit: Seconds,
		Why: "The wait between a request's arrival and its first decode from which it counts as queued (summary.QueuedWait, which counts the requests): reading and tokenizing a request takes milliseconds; a tenth of a second is another request's prefill or a dozen of its tokens. " +
			"A slower CPU takes longer to read a request, but not near a tenth of a second."}
	queuedWarn = &Threshold{Name: "queuedWarn", Value: 0.5, Unit: Seconds,
		Why: "The mean wait of the queued requests from which the finding is a warning: a wait a user sees before the first token, on any CPU."}
)

// slotsAdvice says in p's runtime's words how a server computes more requests at once,
// having computed at most slots sequences at a time.
func slotsAdvice(p *summary.Process, slots int64) string {
	at := "one request at a time"
	more := "give it more slots"
	if slots > 1 {
		at = fmt.Sprintf("at most %d requests at once", slots)
		more = fmt.Sprintf("every one of its %d slots was busy: more slots, where memory allows, or another replica behind the same endpoint", slots)
	}
	switch {
	case p.Runtime == "ollama":
		return fmt.Sprintf("Ollama's runner computed %s, and ollama serve held the others until a slot was free: %s (`OLLAMA_NUM_PARALLEL`; Ollama gives each slot the model's context, `num_ctx`, so the KV cache grows with them).", at, more)
	case strings.HasPrefix(executable(p), "llama-server"):
		return fmt.Sprintf("llama-server computed %s and deferred the others until a slot was free: %s (`--parallel N`, `-np N`; the slots share the context `-c`, each getting its Nth unless `--kv-unified`, so raise `-c` with it). Decodes then carry several sequences: each request's tokens come a little slower, and none waits for the first.", at, more)
	}
	return fmt.Sprintf("The server computed %s while others waited: %s, computing several sequences in one batch (a sequence id each in llama_batch, and a KV cache with room for them).", at, more)
}

// queuedRequests: requests that waited for the server before it computed them.
func queuedRequests(p *summary.Process) (summary.Finding, bool) {
	r := p.Requests
	if r == nil || float64(r.Queued) < queuedMin.Value {
		return summary.Finding{}, false
	}
	slots := r.MaxShared + 1
	wait := r.QueuedWait / float64(r.Queued)
	ttft := r.QueuedTTFT / float64(r.Queued)
	f := summary.Finding{Severity: summary.Info,
		Title:  fmt.Sprintf("%d of %d requests waited %.2f s on average before the server computed them", r.Queued, r.Count, wait),
		Advice: "Requests reached the server while it was computing others, and waited for it before their first decode. " + slotsAdvice(p, slots),
		Evidence: []string{
			fmt.Sprintf("%d requests waited %.1f s or more between reaching the server and their first decode, each for the request before it on its slot to finish: %.2f s on average, %.1f s in all; their first token came %.0f ms after their first decode, on average", r.Queued, queuedWait.Value, wait, r.QueuedWait, 1e3*ttft),
			fmt.Sprintf("the server computed at most %s in one decode", plural(slots, "sequence")),
		},
		Gain: &summary.Gain{Phase: "time to first token", Per: summary.PerRequest, From: 1e3 * (wait + ttft), To: 1e3 * ttft, Saved: r.QueuedWait,
			Assumes: "a free slot for each request as it came; with more slots each decode carries more sequences, and their tokens come somewhat slower"},
	}
	if w := r.Wait; w != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("of %d requests whose arrival was seen, the wait's median %.0f ms, its 90th percentile %.0f ms, at most %.0f ms", w.Count, w.P50, w.P90, w.Max))
	}
	if wait >= queuedWarn.Value {
		f.Severity = summary.Warning
	}
	return f, true
}
