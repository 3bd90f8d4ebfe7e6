package advise

import (
	"fmt"

	"github.com/profinfer/profinfer/internal/summary"
)

// Memory: the process against the memory it may use. Its threads waiting for the disk
// while it runs are threads-blocked's (cpu.go); its death by the OOM killer is here.

var oomRule = Rule{
	ID:    "oom-killed",
	Name:  "killed by the OOM killer",
	Fires: "the process ended killed by the OOM killer (`profinfer.exit.oom_killer` on its `process.exit` event)",
	Says:  "which OOM killer, the memory cgroup, its limit and the peak it reached, what the process had computed, and what takes the memory: the weights, the KV cache (the context size, and for a server its slots)",
	apply: oomKilled,
}

// oomKilled: the kernel killed the process for memory.
func oomKilled(p *summary.Process) (summary.Finding, bool) {
	e := p.End
	if e == nil || e.OOM == "" {
		return summary.Finding{}, false
	}
	f := summary.Finding{ID: "oom-killed", Severity: "warning",
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

// contextOption names how p's runtime is told its context size.
func contextOption(p *summary.Process) string {
	if p.Runtime == "ollama" {
		return "num_ctx, and OLLAMA_NUM_PARALLEL for the slots"
	}
	return "-c, and --parallel for a server's slots"
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
