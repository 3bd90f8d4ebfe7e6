package advise

import (
	"fmt"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Memory: the process against the memory it may use. Its threads waiting for the disk
// while it runs are threads-blocked's (cpu.go); its death by the OOM killer is here.

var oomRule = Rule{
	ID:    "oom-killed",
	Name:  "killed by the OOM killer",
	Reads: []string{schema.EventProcessExit, schema.ProfinferExitOOMKiller, schema.ProfinferExitCgroup},
	Fires: "the process ended killed by the OOM killer",
	Says:  "which OOM killer, the memory cgroup, its limit and the peak it reached, what the process had computed, and what takes the memory: the weights, the KV cache (the context size, and for a server its slots)",
	apply: oomKilled,
}

// oomKilled: the kernel killed the process for memory.
func oomKilled(p *summary.Process) (summary.Finding, bool) {
	e := p.End
	if e == nil || e.OOM == "" {
		return summary.Finding{}, false
	}
	f := summary.Finding{Severity: summary.Warning,
		Title: "The process was killed by the OOM killer",
		Advice: "The model needs more memory than it may use. What it takes is its weights (mapped from the model file, or copied into memory where a CPU backend repacks them), " +
			"its KV cache (the context size, times the parallel slots of a server) and its compute buffers (the batch sizes). " +
			"Raise the limit above the peak, or use a smaller quantisation, a smaller context (" + contextOption(p) + ") or fewer slots.",
	}
	switch e.OOM {
	case "cgroup":
		f.Title = fmt.Sprintf("Killed by the OOM killer of memory cgroup %s", e.Cgroup)
		line := fmt.Sprintf("the cgroup's limit is %s", mb(e.Limit))
		if e.Peak > 0 {
			line += fmt.Sprintf("; its usage peaked at %s", mb(e.Peak))
		}
		f.Evidence = append(f.Evidence, line)
	case "system":
		f.Title = "Killed by the system's OOM killer: the machine ran out of memory"
		f.Advice += " Here it was the machine's memory, not a limit: other processes took the rest."
	}
	f.Evidence = append(f.Evidence, "it ended "+e.Text, "gain not estimated: the process did not run to its end")
	if p.Model != "" {
		f.Evidence = append(f.Evidence, "model "+p.Model)
	}
	return f, true
}

var coldRule = Rule{
	ID:         "cold-start",
	Name:       "cold start",
	Reads:      []string{schema.SpanGraph, schema.GGMLGraphMajorFaults, schema.GGMLGraphOnCPUNS},
	Fires:      "the process's first graph took ≥ {coldRatio} the later graphs of its phase, and ≥ {coldCost} more, with major page faults or in a phase whose threads had their CPUs (not [starved](roofline.md#on-a-shared-machine-the-threads-cpu-share)): information, a warning from {coldWarn}",
	Says:       "the first graph's time against the later ones, its major page faults (the disk) or their absence (the page tables of a mapped model), and how to pay it before the first request: a warm-up, `--mlock` or `--no-mmap`; for Ollama, `keep_alive`",
	Thresholds: []*Threshold{coldRatio, coldCost, coldWarn},
	apply:      coldStart,
}

// Thresholds of a cold graph, the cold start's and the one after an idle spell: a first
// graph is slower for its buffers' first touch too, by far less than a model faulted in.
var (
	coldRatio = &Threshold{Name: "coldRatio", Value: 3, Unit: Ratio,
		Why: "A first graph is slower for its buffers' first touch too, by a fraction of itself; one that faults the model in, by several times. " +
			"A ratio to the same run's warm graphs of the phase: the CPU's speed scales both, and reads from the disk, which it does not speed up, only stand out more on a faster one."}
	coldCost = &Threshold{Name: "coldCost", Value: 0.5, Unit: Seconds,
		Why: "And that much more than a warm graph: a small model's graphs take milliseconds, so 3× of one can be a first touch alone, while half a second is a pause a request sees. " +
			"Seconds a user waits, which mean the same on any CPU."}
	coldWarn = &Threshold{Name: "coldWarn", Value: 1, Unit: Seconds,
		Why: "A cold graph that cost this much more is a warning: a second added to the request it fell in, on any CPU."}
	idleAfter = &Threshold{Name: "idleAfter", Value: summary.IdleAfter, Unit: Seconds,
		Why: "How long a process computes nothing before its next graph is one after an idle spell (summary.IdleAfter, which picks the graphs): requests a second apart are a server's ordinary pace. " +
			"Set by the clients' pace, not the CPU's."}
)

// beyondWarm is what a graph of secs took beyond warm, a warm graph's of its phase, in
// seconds, where it was a cold graph (coldRatio× and coldCost more); 0 otherwise.
func beyondWarm(secs, warm float64) float64 {
	if secs < coldRatio.Value*warm || secs-warm < coldCost.Value {
		return 0
	}
	return secs - warm
}

// coldSeverity is the severity of a cold graph that cost seconds beyond the warm ones.
func coldSeverity(cost float64) summary.Severity {
	if cost >= coldWarn.Value {
		return summary.Warning
	}
	return summary.Info
}

// coldCosts is what p's first graph took beyond the later ones of its phase, in seconds;
// 0 where it was no cold start.
func coldCosts(p *summary.Process) float64 {
	c := p.Cold
	if c == nil {
		return 0
	}
	// A first graph that read nothing from the disk, in a phase whose threads lacked the
	// CPU, says nothing of a cold start: its time beyond the others may be the
	// contention's, which spreads a starved phase's graphs widely (beside two busy loops,
	// a first decode graph of 1.68 s against 0.53 s, with no fault).
	if ph := seen(p, c.Phase); c.Faults == 0 && ph != nil && ph.CPU != nil && ph.CPU.Starved {
		return 0
	}
	return beyondWarm(c.Seconds, c.Warm)
}

// cold says whether p's major faults were its cold start's: its first graph's, next to
// none after.
func cold(p *summary.Process) bool {
	c := p.Cold
	return coldCosts(p) > 0 && c.Faults > 0 && c.WarmFaults < max(c.WarmGraphs, 1)
}

// coldStart: the first graph computed with nothing of the model in memory yet.
func coldStart(p *summary.Process) (summary.Finding, bool) {
	cost := coldCosts(p)
	if cost == 0 {
		return summary.Finding{}, false
	}
	c := p.Cold
	f := summary.Finding{Severity: coldSeverity(cost),
		Title:    fmt.Sprintf("A cold start: the first %s graph took %.2f s, %.0f× the later ones", c.Phase, c.Seconds, c.Seconds/c.Warm),
		Evidence: []string{fmt.Sprintf("the first %s graph took %.2f s; the later ones %.3f s each", c.Phase, c.Seconds, c.Warm)},
	}
	if c.Faults > 0 {
		f.Advice = "The model's pages were not in memory when its first tokens were computed, so that graph read them from the disk, and the first request with it. "
		f.Evidence = append(f.Evidence, fmt.Sprintf("it took %d major page faults (reads from the disk); the %d graphs after, %d", c.Faults, c.WarmGraphs, c.WarmFaults))
	} else {
		f.Advice = "The first graph faulted the model in: its pages were in the page cache, but the process had not touched them, so each was mapped on first use, and the first request paid for it. "
		f.Evidence = append(f.Evidence, "it took no major page fault: the model came from the page cache, not the disk")
	}
	f.Advice += "Pay it before the first request: " + warmOption(p) + "."
	f.Evidence = append(f.Evidence, fmt.Sprintf("%.2f s beyond the later graphs, once, in the first request", cost))
	return f, true
}

var idleRule = Rule{
	ID:         "idle-reclaimed",
	Name:       "model reclaimed while idle",
	Reads:      []string{schema.SpanGraph, schema.GGMLGraphMajorFaults},
	Fires:      "a graph {idleAfter} or more after the one before took major page faults and ≥ {coldRatio} the warm graphs of its phase, and ≥ {coldCost} more: information, a warning from {coldWarn}",
	Says:       "how long the process had computed nothing, that graph's time and reads from the disk against the warm graphs, and how to keep the model resident: `--mlock`, or memory for the model's file beside the rest (a cgroup's limit counts its page cache); for Ollama, `keep_alive`",
	Thresholds: []*Threshold{idleAfter, coldRatio, coldCost, coldWarn},
	apply:      idleReclaimed,
}

// resumedCost is what p's slowest graph after an idle spell took beyond the warm ones of
// its phase, in seconds; 0 where it was no slower than a cold start's thresholds ask.
func resumedCost(p *summary.Process) float64 {
	if p.Resumed == nil {
		return 0
	}
	return beyondWarm(p.Resumed.Seconds, p.Resumed.Warm)
}

// idleReclaimed: the model's pages reclaimed while the process computed nothing, read
// back from the disk by its next graph.
func idleReclaimed(p *summary.Process) (summary.Finding, bool) {
	cost := resumedCost(p)
	if cost == 0 {
		return summary.Finding{}, false
	}
	r := p.Resumed
	f := summary.Finding{Severity: coldSeverity(cost),
		Title: fmt.Sprintf("The model was read back from the disk after %.0f s idle: the next %s graph took %.2f s, %.0f× the warm ones", r.Idle, r.Phase, r.Seconds, r.Seconds/r.Warm),
		Advice: fmt.Sprintf("While the process computed nothing for %.0f s, the model's pages left memory (the page cache gave them to other work, or a memory limit pressed), "+
			"so the first graph after read them back from the model file, and the request then paid for it. ", r.Idle) + keepOption(p) + ".",
		Evidence: []string{
			fmt.Sprintf("after %.1f s without a graph, a %s graph took %.2f s; the warm ones %.3f s each", r.Idle, r.Phase, r.Seconds, r.Warm),
			fmt.Sprintf("it took %s (reads from the disk); %s after an idle spell took them, %d in all", plural(r.Faults, "major page fault"), plural(r.Graphs, "graph"), r.AllFaults),
			fmt.Sprintf("%.2f s beyond the warm graphs in that one; gain not estimated beyond it: how often the pages leave depends on the machine's other work", cost),
		},
	}
	return f, true
}

// keepOption names how p's runtime keeps its model resident.
func keepOption(p *summary.Process) string {
	if p.Runtime == "ollama" {
		return "Keep it loaded and resident: keep_alive -1 (or OLLAMA_KEEP_ALIVE), and memory for the model beside the rest"
	}
	return "Keep it resident: --mlock (it needs the memlock limit, or CAP_IPC_LOCK), or leave the model's file room in memory beside the rest (a cgroup's limit counts its page cache)"
}

// warmOption names how p's runtime keeps its model in memory.
func warmOption(p *summary.Process) string {
	if p.Runtime == "ollama" {
		return "keep the model loaded (keep_alive -1, or OLLAMA_KEEP_ALIVE), since Ollama unloads it after 5 idle minutes, and load it with an empty request at start"
	}
	return "a warm-up request at start (llama-server runs one unless --no-warmup), --mlock to keep the pages resident, or --no-mmap to read the model whole at load"
}

// contextOption names how p's runtime is told its context size.
func contextOption(p *summary.Process) string {
	if p.Runtime == "ollama" {
		return "num_ctx, and OLLAMA_NUM_PARALLEL for the slots"
	}
	return "-c, and --parallel for a server's slots"
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
