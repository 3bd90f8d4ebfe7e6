package advise

import (
	"fmt"
	"math"
	"strings"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// The threads: how many the model computes with against the CPUs the process may run on
// (its affinity, which a cpuset bounds; their physical cores; a hybrid CPU's performance
// cores), read by profinfer.process.cpus. A cgroup quota is the quota rule's.

var overCPUsRule = Rule{
	ID:    "threads-over-cpus",
	Name:  "more threads than CPUs",
	Reads: []string{metadata.MetricsInfo.ProfinferProcessCpus.Name, schema.GGMLThreads, schema.GGMLGraphRunqueueNS},
	Fires: "the model computes graphs with more threads than the CPUs the process may run on (warning); or than their physical cores, SMT siblings counted once, or a hybrid CPU's performance cores (info)",
	Says:  "the threads, the CPUs, what the threads lacked where the graphs measured it, and the threads to run with in the runtime's own words (`-t`, `num_thread`, `n_threads`)",
	apply: overCPUs,
}

var fewThreadsRule = Rule{
	ID:    "threads-few",
	Name:  "fewer threads than cores",
	Reads: []string{metadata.MetricsInfo.ProfinferProcessCpus.Name, metadata.MetricsInfo.ProfinferProcessCpusTime.Name, schema.GGMLThreads, schema.GGMLRooflinePeakFraction},
	Fires: "the model computes with fewer threads than the physical cores it may run on (a hybrid CPU's performance cores) and than its CPU quota, {freeCores} or more of its CPUs sat idle on average while it computed (what other processes kept busy is not free), " +
		"its threads had their CPUs (not [starved](roofline.md#on-a-shared-machine-the-threads-cpu-share)), and a judged phase spends ≥ {belowRoofShare} of its op time at {belowRoof} of its roof or below, in ops not overhead-bound (whose time is dispatch and barriers, which more threads lengthen)",
	Says:       "the threads, the cores, how many of its CPUs sat idle, and each phase's time per token with a thread on each idle core, estimated op by op: an op's time shrinks with the threads until it meets its roof, an overhead-bound op's not at all",
	Thresholds: []*Threshold{freeCores, belowRoofShare, belowRoof},
	apply:      fewThreads,
}

// Thresholds of the threads rules.
var (
	freeCores = &Threshold{Name: "freeCores", Value: 0.5, Unit: Number,
		Why: "The CPUs, idle beside the model's threads and its neighbours', from which another thread has one of its own: a core half busy with another process shares its time with the thread, and the thread holds up every node. " +
			"A count of CPUs idle on average, not of their speed."}
	belowRoofShare = &Threshold{Name: "belowRoofShare", Value: 0.3, Unit: Share,
		Why: "A phase whose ops below their roof hold this share of its op time or more would gain from more threads, enough to be worth a run to compare. A share of the phase's own op time, whatever the CPU's speed."}
	belowRoof = &Threshold{Name: "belowRoof", Value: 0.5, Unit: Share,
		Why: "An op at half its roof or less has room to grow with more threads. The roofs are this machine's, measured, so a share of them means the same on a slower or faster CPU."}
)

// threadsOption names how p's runtime is told to compute with n threads.
func threadsOption(p *summary.Process, n int) string {
	switch {
	case p.Runtime == "ollama":
		return fmt.Sprintf("num_thread %d (PARAMETER num_thread in the Modelfile, or options.num_thread in the request)", n)
	case p.Runtime == "whisper.cpp":
		return fmt.Sprintf("-t %d (n_threads in whisper_full_params, for a binding)", n)
	case strings.HasPrefix(executable(p), "llama-"):
		return fmt.Sprintf("-t %d (--threads; -tb for the prompt's batches)", n)
	}
	return plural(int64(n), "thread") + " (n_threads and n_threads_batch of llama_context_params, or the binding's threads option)"
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// overCPUs: the model's threads outnumber the CPUs, the cores, or the performance cores
// the process may run on.
func overCPUs(p *summary.Process) (summary.Finding, bool) {
	c := p.CPUs
	if c == nil || c.Threads == 0 {
		return summary.Finding{}, false
	}
	wait := "ggml's threads wait for each other at every node, so a node ends only when its slowest thread is done: "
	var f summary.Finding
	switch {
	case c.Threads > int64(c.Allowed):
		f = summary.Finding{Severity: summary.Warning,
			Title: fmt.Sprintf("%d threads on %s: the model's threads take turns on them", c.Threads, plural(int64(c.Allowed), "CPU")),
			Advice: wait + "with more threads than CPUs, a thread without one holds every node up, while the others spin at the barrier on the CPUs it needs. " +
				fmt.Sprintf("Run with %s, the CPUs it may use. ", threadsOption(p, c.Allowed)) + starvedNote,
		}
	case c.Threads > int64(c.Cores):
		f = summary.Finding{Severity: summary.Info,
			Title: fmt.Sprintf("%d threads on %d physical cores: SMT siblings share a core", c.Threads, c.Cores),
			Advice: wait + "two threads on one core's SMT siblings share its vector units and caches, and each runs slower than a thread with a core of its own. " +
				fmt.Sprintf("Try %s, one a core, and compare (profinfer compare): the matmuls usually run as fast or faster.", threadsOption(p, c.Cores)),
		}
	case c.Performance > 0 && c.Threads > int64(c.Performance) && c.Allowed > c.Performance:
		f = summary.Finding{Severity: summary.Info,
			Title: fmt.Sprintf("%d threads on a hybrid CPU with %d performance cores: efficient cores hold each node up", c.Threads, c.Performance),
			Advice: wait + "a thread on an efficient core is the slowest at every node. " +
				fmt.Sprintf("Try %s on the performance cores alone (taskset, or --cpu-mask with llama.cpp's tools), and compare (profinfer compare).", threadsOption(p, c.Performance)),
		}
	default:
		return summary.Finding{}, false
	}
	line := fmt.Sprintf("the model's graphs were computed with %d threads; the process may run on %d CPUs, %d physical cores", c.Threads, c.Allowed, c.Cores)
	if c.Performance > 0 {
		line += fmt.Sprintf(", %d of them performance cores", c.Performance)
	}
	f.Evidence = append(f.Evidence, line)
	if c.Measured {
		f.Evidence = append(f.Evidence, idleCPUs(c))
	}
	if ph := starved(p, summary.LackedCPU); ph != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: the threads had a CPU for %s of their graphs' time, and waited for one for %s of it",
			ph.Name, pct(ph.CPU.Share), pct(ph.CPU.Wait/ph.CPU.ThreadSeconds)))
	}
	f.Evidence = append(f.Evidence, "gain not estimated: the threads' spinning at the barriers counts as work, so the figures cannot split it off; run with the threads advised and compare (profinfer compare)")
	return f, true
}

// fewThreads: the model computes with fewer threads than the cores it may use, had its
// CPUs, and its ops have room below their roofs.
func fewThreads(p *summary.Process) (summary.Finding, bool) {
	c := p.CPUs
	if c == nil {
		return summary.Finding{}, false
	}
	cores, kind := c.Cores, "cores"
	if c.Performance > 0 { // a hybrid CPU: its efficient cores would hold each node up
		cores, kind = c.Performance, "performance cores"
	}
	if c.Threads == 0 || c.Threads >= int64(cores) || p.Quota != nil && float64(c.Threads) >= p.Quota.CPUs-1e-9 {
		return summary.Finding{}, false
	}
	// The idle cores: a thread each on them, no more. Unmeasured (an older collector's
	// data), every core beside the threads counts idle.
	free := float64(cores) - float64(c.Threads)
	if c.Measured {
		free = min(free, c.Idle)
	}
	if free < freeCores.Value {
		return summary.Finding{}, false
	}
	to := min(c.Threads+int64(math.Round(free)), int64(cores))
	var best *summary.Gain
	var below float64
	for _, ph := range p.Phases {
		// Its threads had their CPUs: a verdict on their share, and not starved.
		if !judged(ph) || ph.CPU != nil && (!ph.CPU.Judged || ph.CPU.Starved) || ph.Tokens == 0 {
			continue
		}
		g, room := moreThreads(ph, float64(c.Threads), float64(to))
		if room < belowRoofShare.Value || g == nil {
			continue
		}
		if best == nil || g.Saved > best.Saved {
			best, below = g, room
		}
	}
	if best == nil {
		return summary.Finding{}, false
	}
	idle := "the other cores sat idle"
	if to < int64(cores) {
		idle = fmt.Sprintf("%.1f of its CPUs sat idle", free)
	}
	f := summary.Finding{Severity: summary.Warning,
		Title: fmt.Sprintf("%s on %d %s: %s", plural(c.Threads, "thread"), cores, kind, idle),
		Advice: fmt.Sprintf("The model's threads had their CPUs, and its ops ran below their roofs: more threads would compute them faster. "+
			"Run with %s, one a core left free, if nothing else needs those cores.", threadsOption(p, int(to))),
		Evidence: []string{
			fmt.Sprintf("the model's graphs were computed with %s; the process may run on %d %s", plural(c.Threads, "thread"), cores, kind),
			fmt.Sprintf("%s: %s of its op time in ops below half their roof", best.Phase, pct(below)),
		},
		Gain: best,
	}
	if c.Measured {
		f.Evidence = append(f.Evidence, idleCPUs(c))
	} else {
		f.Evidence = append(f.Evidence, "how idle the other cores sat was not measured (an older collector's data): the estimate counts every one free, as nothing else may need them")
	}
	return f, true
}

// idleCPUs says how many of the CPUs c sat idle while the model computed.
func idleCPUs(c *summary.CPUs) string {
	return fmt.Sprintf("%.1f of the %d CPUs it may run on sat idle on average while it computed (%s of their time); the rest were its threads' and other processes'",
		c.Idle, c.Allowed, pct(c.Idle/float64(max(c.Allowed, 1))))
}

// moreThreads estimates phase ph's time per token with threads `to` in place of `from`,
// op by op: an op's time shrinks in proportion, but not below what its roof allows (its
// time times the share of the roof it reached). Ops without a roof figure keep their
// time, and so do ops judged overhead-bound: their time is their nodes' dispatch and
// barriers, which more threads lengthen, not their work (a deep, narrow model's decode
// ran 2.0× faster on 1 thread than on 2). It returns the estimate and the share of op
// time in ops below half their roof that more threads would speed.
func moreThreads(ph *summary.Phase, from, to float64) (*summary.Gain, float64) {
	var now, then, below float64
	for _, o := range ph.Ops {
		now += o.Share
		switch {
		case o.PeakFrac <= 0, o.Bound == summary.BoundOverhead:
			then += o.Share
		default:
			then += o.Share * max(from/to, min(o.PeakFrac, 1))
			if o.PeakFrac <= belowRoof.Value {
				below += o.Share
			}
		}
	}
	if now <= 0 || ph.Tokens == 0 {
		return nil, 0
	}
	perToken := 1e3 * ph.DecodeSeconds / float64(ph.Tokens)
	to2 := perToken * then / now
	return &summary.Gain{Phase: ph.Name, From: perToken, To: to2, Saved: (perToken - to2) * float64(ph.Tokens) / 1e3,
		Assumes: fmt.Sprintf("each op's time shrinks from %.0f to %.0f threads, down to what its roof allows; ops without a roof figure, and overhead-bound ones, keep theirs; the phase's time is its graphs'", from, to)}, below / now
}
