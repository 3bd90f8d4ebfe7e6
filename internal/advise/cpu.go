package advise

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// The CPUs: whether the model's threads had them, and how they shared them.

// Thresholds of the CPU rules, each a share of the same run's figures, so that a faster
// or slower CPU scales both sides of the comparison alike.
var (
	barrierShare = &Threshold{Name: "barrierShare", Value: 0.2, Unit: Share,
		Why: "Threads waiting at barriers for a fifth of their node time are imbalanced, or more than the machine serves well. A share of the same threads' node time, which a faster or slower CPU shortens or lengthens alike."}
	contentionShare = &Threshold{Name: "contentionShare", Value: 0.1, Unit: Share,
		Why: "Threads off the CPU or waiting for one for a tenth of their node time are contended (the scheduler layer's per-node figures; the default config's per-graph ones are the phase's verdict, its threads' CPU share). " +
			"overhead-bound leaves such a phase's ops to this finding: they ran slow for want of a CPU. A share of the same threads' node time, whatever the CPU's speed."}
	throttledShare = &Threshold{Name: "throttledShare", Value: 0.1, Unit: Share,
		Why: "A quota that throttled the process in a tenth of its periods holds it back: each throttled period stops a thread that every other waits for at the next barrier. A share of the periods the kernel counted, whatever the CPU's speed."}
	contendedMaterial = &Threshold{Name: "contendedMaterial", Value: 0.1, Unit: Share,
		Why: "Contention that cost under a tenth of the process's graph time, over all its phases, is said as information: a burst of other work (a server's front end taking a batch of requests, a test client) starves a prefill's few graphs without the machine being the bottleneck. " +
			"A share of the same run's graph time, whatever the CPU's speed."}
	othersShare = &Threshold{Name: "othersShare", Value: 0.5, Unit: Share,
		Why: "A thread waits for a CPU that another process holds while that process runs, so the others' share of the CPUs bounds the waiting they cause: about one for one while the model has no more threads than CPUs, and less over spans that count the gaps between graphs too. " +
			"Others that took under half the threads' waiting share of their CPUs cannot have caused most of it. Shares of the same spans' time, whatever the CPU's speed."}
	idleFaultShare = &Threshold{Name: "idleFaultShare", Value: 0.9, Unit: Share,
		Why: "Where the cold start's and the idle spells' graphs took nine in ten of a phase's major faults or more, they are its disk waits, and cold-start or idle-reclaimed says them; the rest may be a model that does not fit. " +
			"A share of the same phase's faults: a count of pages read, which no CPU's speed changes."}
)

var quotaRule = Rule{
	ID:         "cpu-quota",
	Name:       "CPU quota",
	Reads:      []string{metadata.MetricsInfo.ProfinferCgroupCPULimit.Name, metadata.MetricsInfo.ProfinferCgroupCPUPeriods.Name, metadata.MetricsInfo.ProfinferCgroupCPUThrottledPeriods.Name, schema.GGMLThreads},
	Fires:      "the process's cgroup quota is below the threads the model computes with, or throttled it in ≥ {throttledShare} of its periods",
	Says:       "the quota, the threads, the throttling, and the `-t` the quota supports",
	Thresholds: []*Threshold{throttledShare},
	apply:      quota,
}

// when says what span a quota's throttling counts cover.
func when(q *summary.Quota) string {
	if q.SinceMade {
		return "since the cgroup was made"
	}
	return "while profiled"
}

// quota: the process's cgroup CPU quota is below the threads the model computes with, or
// throttled it.
func quota(p *summary.Process) (summary.Finding, bool) {
	q := p.Quota
	if q == nil || q.CPUs <= 0 {
		return summary.Finding{}, false
	}
	over := float64(q.Threads) > q.CPUs+1e-9
	throttled := float64(q.Throttled) / float64(max(q.Periods, 1))
	if !over && throttled < throttledShare.Value {
		return summary.Finding{}, false
	}
	supports := max(int(math.Floor(q.CPUs+1e-9)), 1)
	f := summary.Finding{
		Severity: summary.Warning,
		Title:    fmt.Sprintf("A CPU quota of %.2g CPUs holds the model back", q.CPUs),
		Advice: fmt.Sprintf("ggml's threads wait for each other at every node, so one thread the quota holds back stalls them all. "+
			"The quota supports -t %d: run with it, or raise the quota to the threads the model runs.", supports),
		Evidence: []string{fmt.Sprintf("cgroup %s may use %.2f CPUs", q.Cgroup, q.CPUs)},
	}
	if q.Threads > 0 {
		f.Evidence[0] += fmt.Sprintf("; the model computes with %d threads", q.Threads)
	}
	if q.Periods > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("throttled in %d of %d periods (%s) %s, held back %.1f s in all (summed over CPUs)",
			q.Throttled, q.Periods, pct(throttled), when(q), q.ThrottledSeconds))
	}
	return f, true
}

var contentionRule = Rule{
	ID:    "threads-contended",
	Name:  "threads contended",
	Reads: []string{schema.GGMLGraphOnCPUNS, schema.GGMLGraphRunqueueNS, schema.GGMLSchedOffCPUNS, schema.GGMLSchedRunqueueNS, schema.ResourceGGMLDeviceSoftware, metadata.MetricsInfo.ProfinferProcessCpusTime.Name},
	Fires: "the phase is [starved](roofline.md#on-a-shared-machine-the-threads-cpu-share) and its threads waited for a CPU for as long as they slept or longer (default config), or were off the CPU ≥ {contentionShare} of their node time (scheduler layer, which adds preemptions); " +
		"not where the waits are the process's own (threads-queued); a warning where it cost ≥ {contendedMaterial} of the process's graph time over all phases, information under",
	Says:       "the share, what it cost against the graphs that had their CPUs, and where to look: neighbours, a quota, `-t` above the cores available; on a [software device](#a-software-device), that device's threads",
	Thresholds: []*Threshold{contentionShare, contendedMaterial},
	// More threads than CPUs is the contention's known cause, which that finding says.
	DefersTo: []Defer{{To: "threads-over-cpus", When: "where it is a warning: more threads than CPUs",
		when: func(_ *summary.Process, made summary.Finding) bool { return made.Severity == summary.Warning }}},
	apply: contention,
}

// starved is the phase whose graphs' threads had a CPU for the least share of their
// time, among the starved ones (the page's and the op table's verdict) whose threads
// lacked it for one of the reasons (summary.Lacked*); nil if none.
func starved(p *summary.Process, lacked ...string) *summary.Phase {
	var worst *summary.Phase
	for _, ph := range p.Phases {
		c := ph.CPU
		if c == nil || !c.Starved || !slices.Contains(lacked, c.Lacked) {
			continue
		}
		if worst == nil || c.Share < worst.CPU.Share {
			worst = ph
		}
	}
	return worst
}

// starvedNote ends the advice of a finding that the model's threads lacked the CPU.
const starvedNote = "While they lack it, ops are judged starved rather than memory-, compute- or overhead-bound, and no advice on kernels or batching applies."

// contention: the model's threads lacked a CPU for a share of their graphs' time, as
// every graph measures it; the scheduler layer adds per-node detail where it is on. Where
// the process computes on a software device, its threads are what took the CPUs.
func contention(p *summary.Process) (summary.Finding, bool) {
	worst := starved(p, summary.LackedCPU)
	sched, schedShare := worstPhase(p, func(s summary.SchedSums) float64 { return s.OffCPU + s.RunQueue })
	if sched != nil && schedShare < contentionShare.Value {
		sched = nil
	}
	if worst != nil && ownWait(p, worst) {
		worst = nil // threads-queued's
	}
	if worst == nil && sched == nil {
		return summary.Finding{}, false
	}
	f := summary.Finding{
		Severity: summary.Warning,
		Title:    "The model's threads lacked the CPU: the machine, not the model, is the bottleneck",
		Advice: "Something else had the CPUs the model's threads run on: other processes (noisy neighbours, a batch job), a cgroup CPU quota, or more threads (-t/--threads) than the cores this process really gets. " +
			"ggml's threads wait for each other at every node, so one thread off its CPU stalls them all. Move the other load away, give the model cores of its own (cpuset, taskset), or lower -t to the cores it gets. " + starvedNote,
	}
	if sw, on := software(p); sw != "" {
		dev := strings.Join(on, ", ")
		f.Title = fmt.Sprintf("The model's threads lacked the CPU: the %s device is %s, a software driver computing on the same cores", dev, sw)
		f.Advice = fmt.Sprintf("%s is not a GPU: it computes the %s backend's splits in threads of this process (llvmpipe-0, llvmpipe-1, …: LP_NUM_THREADS of them, by default one per core), "+
			"on the CPUs ggml's threads compute on. ggml's threads wait for each other at every node, so one that a device thread displaced stalls them all. "+
			"A hardware GPU is the remedy. On this machine, give the two fewer threads so that together they fit the cores (LP_NUM_THREADS for the device's, -t/--threads for ggml's), "+
			"or keep the model on the CPU backend alone, usually faster than a software device: a CPU build, or no GGML_VK_VISIBLE_DEVICES, without which ggml-vulkan skips CPU-type devices. ", sw, dev) + starvedNote
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s computes on %s, a software driver in the process's own threads (ggml.device.software)", dev, sw))
	}
	if worst != nil {
		f.Evidence = append(f.Evidence, starvedEvidence(worst)...)
	}
	if c := p.CPUs; c != nil && c.Measured {
		f.Evidence = append(f.Evidence, idleCPUs(c))
	}
	if sched != nil {
		s := sched.Sched
		f.Evidence = append(f.Evidence,
			fmt.Sprintf("%s: %s of thread node time off the CPU (%s of it runnable, waiting for a CPU)", sched.Name, pct(schedShare), pct(s.RunQueue/max(s.OffCPU+s.RunQueue, 1e-12))),
			fmt.Sprintf("%d preemptions and %d migrations over %d traced graphs", s.Preemptions, s.Migrations, sched.TracedGraphs))
	}
	if lost, all := contentionCost(p, worst, sched, schedShare); lost < contendedMaterial.Value*all {
		f.Severity = summary.Info
		f.Evidence = append(f.Evidence, fmt.Sprintf("it cost at most %.2f s, %s of the %.1f s the process's graphs took over all phases: under the %s at which the machine is the bottleneck",
			lost, pct(lost/max(all, 1e-12)), all, contendedMaterial))
	}
	return f, true
}

// starvedEvidence says what a phase starved for a CPU had of it, and what that cost.
func starvedEvidence(worst *summary.Phase) []string {
	c := worst.CPU
	line := fmt.Sprintf("%s: the model's threads had a CPU for %s of their graphs' time over %d graphs", worst.Name, pct(c.Share), c.Graphs)
	if c.Wait > 0 {
		line += fmt.Sprintf(", and were runnable but waiting for one for %s of it", pct(c.Wait/c.ThreadSeconds))
	}
	out := []string{line}
	if c.Cost > 0 && worst.DecodeSeconds > 0 {
		out = append(out, fmt.Sprintf("its %d contended graphs took %.1f s more than at the others' time per token: %s of %s time",
			c.Contended, c.Cost, pct(c.Cost/worst.DecodeSeconds), worst.Name))
	} else if worst.TokensPerSec > 0 {
		out = append(out, fmt.Sprintf("%s ran at %.1f tokens/s; no graph had its CPUs to itself to measure the cost against", worst.Name, worst.TokensPerSec))
	}
	return out
}

var queuedThreadsRule = Rule{
	ID:   "threads-queued",
	Name: "threads queued behind their own",
	Reads: []string{schema.GGMLGraphOnCPUNS, schema.GGMLGraphRunqueueNS, metadata.MetricsInfo.ProfinferProcessCpusTime.Name, metadata.MetricsInfo.ProfinferProcessCpus.Name,
		metadata.MetricsInfo.ProfinferCgroupCPULimit.Name, schema.ResourceGGMLDeviceSoftware},
	Fires: "the phase is [starved](roofline.md#on-a-shared-machine-the-threads-cpu-share), its threads waited for a CPU for as long as they slept or longer, and the waits are the process's own: other processes took under {othersShare} of the threads' waiting share of the CPUs, " +
		"the model computes with no more threads than the CPUs it may run on, no CPU quota holds it back and no software device computes beside it; a warning where it cost ≥ {contendedMaterial} of the process's graph time over all phases, information under",
	Says:       "the share, what it cost, how idle the CPUs sat and what other processes took, and the fewer threads to compare against",
	Thresholds: []*Threshold{othersShare, contendedMaterial},
	apply:      queuedThreads,
}

// ownWait says whether the waits of starved phase worst's threads are the process's own:
// other processes took too little of its CPUs over the same spans to have caused them,
// and none of contention's other causes holds (more threads than CPUs, a quota, a
// software device's threads). False where what the others took was not measured.
func ownWait(p *summary.Process, worst *summary.Phase) bool {
	c := p.CPUs
	if c == nil || !c.OthersMeasured || c.Allowed <= 0 || worst.CPU.ThreadSeconds <= 0 || c.Threads > int64(c.Allowed) {
		return false
	}
	if sw, _ := software(p); sw != "" {
		return false
	}
	if _, held := quota(p); held {
		return false
	}
	return c.Others/float64(c.Allowed) < othersShare.Value*worst.CPU.Wait/worst.CPU.ThreadSeconds
}

// queuedThreads: the model's threads waited for a CPU that no other process took: they
// were queued behind the process's own threads.
func queuedThreads(p *summary.Process) (summary.Finding, bool) {
	worst := starved(p, summary.LackedCPU)
	if worst == nil || !ownWait(p, worst) {
		return summary.Finding{}, false
	}
	c := p.CPUs
	fewer := max(int(c.Threads)-1, 1)
	f := summary.Finding{
		Severity: summary.Warning,
		Title:    "The model's threads waited for a CPU that no other process took: they queued behind the process's own",
		Advice: "Other processes took too little of the CPUs to have kept the model's threads waiting, and it computes with no more threads than CPUs: its threads waited behind its own. " +
			"ggml's threads spin at every node's barrier until all have arrived. A thread made or woken for a graph starts on the CPU of the thread that made or woke it, and where the scheduler leaves the two there, they take turns at its tick, each spinning through the other's turn, however idle the other CPUs sit. " +
			"Short graphs suffer it most: a small model's, a token a decode, in a runtime that makes ggml's threads anew for each graph (a build without OpenMP given no threadpool) or wakes them after its own work between tokens (a binding's sampling). " +
			fmt.Sprintf("Fewer threads wait less: compare %s in tokens a second, down to one thread where the graphs are this short. ", threadsOption(p, fewer)) + starvedNote,
		Evidence: starvedEvidence(worst),
	}
	if c.Measured {
		f.Evidence = append(f.Evidence, idleCPUs(c))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("other processes took %.2f of the %d CPUs on average over the same spans (%s of their time), under %s of the threads' waiting share (%s)",
		c.Others, c.Allowed, pct(c.Others/float64(c.Allowed)), othersShare, pct(worst.CPU.Wait/worst.CPU.ThreadSeconds)))
	if lost, all := contentionCost(p, worst, nil, 0); lost < contendedMaterial.Value*all {
		f.Severity = summary.Info
		f.Evidence = append(f.Evidence, fmt.Sprintf("it cost at most %.2f s, %s of the %.1f s the process's graphs took over all phases: under the %s at which it holds the model back",
			lost, pct(lost/max(all, 1e-12)), all, contendedMaterial))
	}
	return f, true
}

// contentionCost is the most that contention cost the process, in seconds of its phases'
// time, and the time of all its phases: the worst starved phase's measured cost where
// some of its graphs had their CPUs, else its time without a CPU; the scheduler layer's
// share of its phase's time where that is the only evidence.
func contentionCost(p *summary.Process, worst, sched *summary.Phase, schedShare float64) (lost, all float64) {
	for _, ph := range p.Phases {
		all += ph.DecodeSeconds
	}
	switch {
	case worst != nil && worst.CPU.Cost > 0:
		lost = worst.CPU.Cost
	case worst != nil:
		lost = (1 - worst.CPU.Share) * worst.DecodeSeconds
	}
	if sched != nil {
		lost = max(lost, schedShare*sched.DecodeSeconds)
	}
	return lost, all
}

// software returns the software driver p's device runs on, in p's own threads on the
// CPUs its model's threads compute on, and the backends that computed splits on it; ""
// where p computes on no such device.
func software(p *summary.Process) (string, []string) {
	if p.Software == "" {
		return "", nil
	}
	var on []string
	for _, b := range p.Backends {
		if b.Backend != backends.CPU && b.Splits > 0 {
			on = append(on, summary.BackendName(b.Backend))
		}
	}
	if len(on) == 0 {
		return "", nil
	}
	return p.Software, on
}

var blockedRule = Rule{
	ID:         "threads-blocked",
	Name:       "threads blocked",
	Reads:      []string{schema.GGMLGraphOnCPUNS, schema.GGMLGraphRunqueueNS, schema.GGMLGraphMajorFaults},
	Fires:      "the phase is [starved](roofline.md#on-a-shared-machine-the-threads-cpu-share), and its threads slept for longer than they waited for a CPU",
	Says:       "with a major page fault a graph or more: they waited for the disk, the weights read back from the model file every token (the major faults a graph); the model does not fit the memory the process may use; otherwise reclaim or a lock",
	Thresholds: []*Threshold{idleFaultShare},
	// Disk waits that were a cold start's or an idle spell's are those findings' to say.
	DefersTo: []Defer{{To: "cold-start", When: idleFaultsWhen, when: idleFaults}, {To: "idle-reclaimed", When: idleFaultsWhen, when: idleFaults}},
	apply:    blocked,
}

// idleFaultsWhen is when threads-blocked gives way to cold-start and to idle-reclaimed,
// for the docs: the same for both, their faults counted together.
const idleFaultsWhen = "where its phase waited for the disk, and the cold start's and the idle spells' graphs took ≥ {idleFaultShare} of the phase's major faults"

// blockedPhase is the starved phase whose threads slept rather than waited for a CPU: in
// major page faults (the disk) or otherwise.
func blockedPhase(p *summary.Process) *summary.Phase {
	return starved(p, summary.LackedDisk, summary.LackedSleep)
}

// idleFaults says whether p's blocked phase waited for the disk, its major faults mostly
// its cold start's and those of its graphs after idle spells, which cold-start and
// idle-reclaimed say.
func idleFaults(p *summary.Process, _ summary.Finding) bool {
	ph := blockedPhase(p)
	if ph == nil || ph.CPU.Lacked != summary.LackedDisk {
		return false
	}
	var f int64
	if cold(p) {
		f += p.Cold.Faults
	}
	if resumedCost(p) > 0 {
		f += p.Resumed.AllFaults
	}
	return f > 0 && float64(f) >= idleFaultShare.Value*float64(ph.CPU.MajorFaults)
}

// blocked: the model's threads were off the CPU for a share of their graphs' time without
// waiting for one: asleep, not runnable, in major page faults or otherwise.
func blocked(p *summary.Process) (summary.Finding, bool) {
	ph := blockedPhase(p)
	if ph == nil {
		return summary.Finding{}, false
	}
	c := ph.CPU
	f := summary.Finding{
		Severity: summary.Warning,
		Title:    "The model's threads were blocked off the CPU, not waiting for one",
		Advice: "The threads slept through part of their graphs without being runnable: memory reclaim, a lock, or I/O. " +
			"Look for what else holds the process. While they sleep, ops are judged by that, not by their kernels.",
		Evidence: []string{fmt.Sprintf("%s: the model's threads had a CPU for %s of their graphs' time over %d graphs, and waited for one for %s of it",
			ph.Name, pct(c.Share), c.Graphs, pct(c.Wait/c.ThreadSeconds))},
	}
	if c.Lacked == summary.LackedDisk {
		f.Title = "The model's threads waited for the disk: page faults read the weights back every token"
		f.Advice = "The threads slept in major page faults: the model's pages were not in memory when they were read, so each was read back from the model file. " +
			"The model does not fit in the memory the process may use (a memory cgroup's limit, or the machine's free memory beside other processes). " +
			"Give it more memory, use a smaller quantisation, or keep it resident (--mlock, where the limit allows it). While they wait, ops are judged by that, not by their kernels."
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d major page faults over those graphs, %.0f a graph", c.MajorFaults, float64(c.MajorFaults)/float64(max(c.Graphs, 1))))
	}
	return f, true
}

var barriersRule = Rule{
	ID:         "barrier-wait",
	Name:       "barrier wait",
	Reads:      []string{schema.GGMLBarrierWaitNS, schema.GGMLThreads},
	Fires:      "threads wait at `ggml_barrier` (measured with the receiver's `barriers` node setting on) ≥ {barrierShare} of their node time",
	Says:       "threads imbalanced, or more than the machine serves well; on a software device, its threads share the cores",
	Thresholds: []*Threshold{barrierShare},
	apply:      barriers,
}

// worstPhase is the phase where time, a part of the threads' node time, is the largest
// share of it, and that share; nil when no phase has any.
func worstPhase(p *summary.Process, time func(summary.SchedSums) float64) (*summary.Phase, float64) {
	var worst *summary.Phase
	var worstShare float64
	for _, ph := range p.Phases {
		if ph.Sched.ThreadTime <= 0 || !judged(ph) {
			continue
		}
		if share := time(ph.Sched) / ph.Sched.ThreadTime; share > worstShare {
			worst, worstShare = ph, share
		}
	}
	return worst, worstShare
}

// barriers: threads waited for the slowest at node barriers.
func barriers(p *summary.Process) (summary.Finding, bool) {
	worst, worstShare := worstPhase(p, func(s summary.SchedSums) float64 { return s.BarrierWait })
	if worst == nil || worstShare < barrierShare.Value {
		return summary.Finding{}, false
	}
	top := ""
	var topShare float64
	for _, o := range worst.Ops {
		if o.Sched.ThreadTime > 0 && o.Sched.BarrierWait > topShare*worst.Sched.BarrierWait {
			top, topShare = o.Op, o.Sched.BarrierWait/worst.Sched.BarrierWait
		}
	}
	f := summary.Finding{
		Severity: summary.Warning,
		Title:    "Threads spend much of each node waiting for the slowest one",
		Advice:   "The work of a node is split unevenly across threads, or there are more threads than this machine serves well (hyper-threads, other load). Try fewer threads (-t) and compare tokens/s; a thread count that divides the rows evenly helps small ops.",
		Evidence: []string{
			fmt.Sprintf("%s: %s of thread node time waiting at ggml_barrier", worst.Name, pct(worstShare)),
			fmt.Sprintf("most of it at %s nodes (%s of the wait)", top, pct(topShare)),
		},
	}
	if sw, on := software(p); sw != "" {
		f.Advice += fmt.Sprintf(" Here the other load is the process's own: the %s device is %s, a software driver whose threads compute on the same cores. "+
			"Give the two fewer threads so that together they fit them (LP_NUM_THREADS for the device's, -t for ggml's), or compute on a hardware GPU.", strings.Join(on, ", "), sw)
	}
	return f, true
}
