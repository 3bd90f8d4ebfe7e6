// Package advise turns a process's measured figures into findings: what to change, each
// with the evidence it stands on. A rule fires only when its evidence is there, and is
// silent, not guessing, when the layer it needs is off.
package advise

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/summary"
)

// Thresholds. Each is a share of the time the rule is about.
const (
	// Decode matmuls streaming weights at this fraction of the measured bandwidth have
	// little left to gain from more threads.
	memoryBoundFraction = 0.8
	// Threads waiting at barriers for this share of their node time are imbalanced, or
	// more than the machine serves well.
	barrierShare = 0.2
	// Threads off the CPU or waiting for one for this share of their node time are
	// contended (the scheduler layer's per-node figures; the default config's per-graph
	// ones are the phase's verdict, summary.ThreadsCPU.Starved).
	contentionShare = 0.1
	// A quota that throttled the process in this share of its periods holds it back.
	throttledShare = 0.1
	// Threads that lacked a CPU and waited for one for this share of their graphs' time
	// were contended; otherwise they were blocked (asleep, not runnable).
	waitedShare = 0.05
	// Backend splits and copies taking this share of the decodes' time.
	offloadShare = 0.2
	// In a process that offloads, the CPU's splits taking this share of the compute.
	fallbackShare = 0.2
	// Decodes a process must have made before its backends are judged.
	minDecodes = 8
	// A MoE layer whose expert selections vary this much (coefficient of variation).
	moeImbalance = 0.5
	// An op with this share of a phase's graph time running under 10% of its roof.
	overheadShare = 0.05
	// A phase needs this many traced graphs before its figures are a verdict.
	minGraphs = 2
)

// Annotate sets every process's findings.
func Annotate(v *summary.View) {
	for _, p := range v.Processes {
		p.Findings = Findings(p)
	}
}

// Findings applies every rule to p, strongest first.
func Findings(p *summary.Process) []summary.Finding {
	out := []summary.Finding{}
	for _, rule := range []func(*summary.Process) (summary.Finding, bool){
		quota, contention, blocked, memoryBound, barriers, deviceUnused, fallback, offload, uneven, overhead,
	} {
		if f, ok := rule(p); ok {
			out = append(out, f)
		}
	}
	return out
}

// phase returns p's phase of that name, if it traced enough graphs for a verdict.
func phase(p *summary.Process, name string) *summary.Phase {
	for _, ph := range p.Phases {
		if ph.Name == name && ph.TracedGraphs >= minGraphs {
			return ph
		}
	}
	return nil
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func gb(x float64) string { return fmt.Sprintf("%.1f GB/s", x/1e9) }

// memoryBound: decode's matmuls stream the weights near the measured bandwidth.
func memoryBound(p *summary.Process) (summary.Finding, bool) {
	ph := phase(p, "decode")
	if ph == nil || p.Roofs.Bandwidth <= 0 {
		return summary.Finding{}, false
	}
	// Each op's fraction is of its nodes' own roofs (roofline.Attained), the bytes that
	// the graph made coming from the caches: never above 1 where no node was.
	var secs, bytes, share, atRoof float64
	for _, o := range ph.Ops {
		if strings.HasPrefix(o.Op, "MUL_MAT") && o.Bandwidth > 0 {
			secs += o.TotalMS / 1e3
			bytes += o.Bandwidth * o.TotalMS / 1e3
			share += o.Share
			atRoof += o.PeakFrac * o.TotalMS / 1e3
		}
	}
	if secs == 0 {
		return summary.Finding{}, false
	}
	frac := atRoof / secs
	if frac < memoryBoundFraction {
		return summary.Finding{}, false
	}
	return summary.Finding{
		ID: "decode-memory-bound", Severity: "info",
		Title:  "Decode is memory-bound: more threads will not make it faster",
		Advice: "Decode matmuls already stream the weights near this machine's memory bandwidth. A smaller quantisation (fewer bytes per weight), a smaller model, or faster memory will speed decode up; extra threads will not.",
		Evidence: []string{
			fmt.Sprintf("decode matmuls moved %s, %s of their roofs (memory's measured %s)", gb(bytes/secs), pct(frac), gb(p.Roofs.Bandwidth)),
			fmt.Sprintf("they take %s of decode graph time over %d traced graphs", pct(share), ph.TracedGraphs),
		},
	}, true
}

// worstPhase is the phase where time, a part of the threads' node time, is the largest
// share of it, and that share; nil when no phase has any.
func worstPhase(p *summary.Process, time func(summary.SchedSums) float64) (*summary.Phase, float64) {
	var worst *summary.Phase
	var worstShare float64
	for _, ph := range p.Phases {
		if ph.Sched.ThreadTime <= 0 || ph.TracedGraphs < minGraphs {
			continue
		}
		if share := time(ph.Sched) / ph.Sched.ThreadTime; share > worstShare {
			worst, worstShare = ph, share
		}
	}
	return worst, worstShare
}

// starved is the phase whose graphs' threads had a CPU for the least share of their
// time, among the starved ones (the page's and the op table's verdict), where they waited for one (waited) or
// did not (blocked); nil if none. Where the kernel does not count waits (none at all),
// a starved phase counts as waiting.
func starved(p *summary.Process, waited bool) *summary.Phase {
	var worst *summary.Phase
	for _, ph := range p.Phases {
		c := ph.CPU
		if c == nil || !c.Starved {
			continue
		}
		if w := c.Wait == 0 || c.Wait >= waitedShare*c.ThreadSeconds; w == waited && (worst == nil || c.Share < worst.CPU.Share) {
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
	worst := starved(p, true)
	sched, schedShare := worstPhase(p, func(s summary.SchedSums) float64 { return s.OffCPU + s.RunQueue })
	if sched != nil && schedShare < contentionShare {
		sched = nil
	}
	if worst == nil && sched == nil {
		return summary.Finding{}, false
	}
	f := summary.Finding{
		ID: "threads-contended", Severity: "warning",
		Title: "The model's threads lacked the CPU: the machine, not the model, is the bottleneck",
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
		c := worst.CPU
		line := fmt.Sprintf("%s: the model's threads had a CPU for %s of their graphs' time over %d graphs", worst.Name, pct(c.Share), c.Graphs)
		if c.Wait > 0 {
			line += fmt.Sprintf(", and were runnable but waiting for one for %s of it", pct(c.Wait/c.ThreadSeconds))
		}
		f.Evidence = append(f.Evidence, line)
		if c.Cost > 0 && worst.DecodeSeconds > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("its %d contended graphs took %.1f s more than at the others' time per token: %s of %s time",
				c.Contended, c.Cost, pct(c.Cost/worst.DecodeSeconds), worst.Name))
		} else if worst.TokensPerSec > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s ran at %.1f tokens/s; no graph had its CPUs to itself to measure the cost against", worst.Name, worst.TokensPerSec))
		}
	}
	if sched != nil {
		s := sched.Sched
		f.Evidence = append(f.Evidence,
			fmt.Sprintf("%s: %s of thread node time off the CPU (%s of it runnable, waiting for a CPU)", sched.Name, pct(schedShare), pct(s.RunQueue/max(s.OffCPU+s.RunQueue, 1e-12))),
			fmt.Sprintf("%d preemptions and %d migrations over %d traced graphs", s.Preemptions, s.Migrations, sched.TracedGraphs))
	}
	return f, true
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

// blocked: the model's threads were off the CPU for a share of their graphs' time without
// waiting for one: asleep, not runnable.
func blocked(p *summary.Process) (summary.Finding, bool) {
	ph := starved(p, false)
	if ph == nil {
		return summary.Finding{}, false
	}
	c := ph.CPU
	return summary.Finding{
		ID: "threads-blocked", Severity: "warning",
		Title: "The model's threads were blocked off the CPU, not waiting for one",
		Advice: "The threads slept through part of their graphs without being runnable: page faults that read the model back from disk (a model larger than the free page cache, or swapped out), memory reclaim, or a lock. " +
			"Keep the model resident (--mlock, enough free memory, no swap) and look for what else holds the process. While they sleep, ops are judged starved.",
		Evidence: []string{fmt.Sprintf("%s: the model's threads had a CPU for %s of their graphs' time over %d graphs, and waited for one for %s of it",
			ph.Name, pct(c.Share), c.Graphs, pct(c.Wait/c.ThreadSeconds))},
	}, true
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
	if !over && throttled < throttledShare {
		return summary.Finding{}, false
	}
	supports := max(int(math.Floor(q.CPUs+1e-9)), 1)
	f := summary.Finding{
		ID: "cpu-quota", Severity: "warning",
		Title: fmt.Sprintf("A CPU quota of %.2g CPUs holds the model back", q.CPUs),
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

// barriers: threads waited for the slowest at node barriers.
func barriers(p *summary.Process) (summary.Finding, bool) {
	worst, worstShare := worstPhase(p, func(s summary.SchedSums) float64 { return s.BarrierWait })
	if worst == nil || worstShare < barrierShare {
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
		ID: "barrier-wait", Severity: "warning",
		Title:  "Threads spend much of each node waiting for the slowest one",
		Advice: "The work of a node is split unevenly across threads, or there are more threads than this machine serves well (hyper-threads, other load). Try fewer threads (-t) and compare tokens/s; a thread count that divides the rows evenly helps small ops.",
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

// offload: splits on other backends and the copies between them cost a large share.
func offload(p *summary.Process) (summary.Finding, bool) {
	for _, name := range []string{"decode", "prefill"} {
		ph := seen(p, name)
		if ph == nil || ph.DecodeSeconds <= 0 || ph.CopySeconds <= 0 {
			continue
		}
		share := ph.CopySeconds / ph.DecodeSeconds
		if share < offloadShare {
			continue
		}
		var moved int64
		for _, c := range p.Copies {
			moved += c.Bytes
		}
		return summary.Finding{
			ID: "offload-copies", Severity: "warning",
			Title:  "Copies between backends cost more than the offload saves",
			Advice: "Tensors cross between backends on every " + name + ". Offload more of the model (more -ngl layers) so splits are fewer, keep the layers that fall back to the CPU together, or keep the model on one backend.",
			Evidence: []string{
				fmt.Sprintf("%s: %s of llama_decode time copying tensors between backends", name, pct(share)),
				fmt.Sprintf("%s of splits on other backends; %.1f MB copied in all", pct(ph.SplitSeconds/ph.DecodeSeconds), float64(moved)/1e6),
			},
		}, true
	}
	return summary.Finding{}, false
}

// notDevice are backends with libraries of their own that compute on no device: RPC
// sends the graph to a server only when asked to, BLAS is the CPU's.
var notDevice = map[string]bool{"rpc": true, "blas": true}

// deviceUnused: a GPU backend is loaded but no split ran on it, which is how a backend that
// found no device it would use falls back to the CPU, silently.
func deviceUnused(p *summary.Process) (summary.Finding, bool) {
	var gpus []string
	for _, b := range p.Loaded {
		if !notDevice[b] {
			gpus = append(gpus, b)
		}
	}
	if len(gpus) == 0 || decodes(p) < minDecodes {
		return summary.Finding{}, false
	}
	for _, b := range p.Backends {
		if b.Backend != backends.CPU && b.Splits > 0 {
			return summary.Finding{}, false
		}
	}
	loaded := strings.Join(gpus, ", ")
	return summary.Finding{
		ID: "device-unused", Severity: "warning",
		Title: "The " + loaded + " backend is loaded, but every node runs on the CPU",
		Advice: "The process loaded a GPU backend that computes nothing: it found no device it would use, or no layer was offloaded to it. " +
			"Look for the devices ggml lists at start in the engine's log. Vulkan skips CPU-type devices (software drivers such as lavapipe) unless GGML_VK_VISIBLE_DEVICES names them; " +
			"CUDA needs its driver and runtime libraries. Then check the GPU layers setting (-ngl, gpuLayers).",
		Evidence: []string{
			fmt.Sprintf("loaded: libggml-%s", strings.Join(gpus, ", libggml-")),
			fmt.Sprintf("%d llama_decode calls, every split on the CPU backend", decodes(p)),
		},
	}, true
}

// fallback: in a process that offloads, the CPU computes a large share: layers the GPU
// layers setting left on the CPU, or ops the GPU backend does not run in the layers it
// computes. The devices' layers tell them apart where their nodes were read.
func fallback(p *summary.Process) (summary.Finding, bool) {
	var dev []string
	onDevice := map[int]bool{}
	read := false // whether any device's nodes were read: its layers are then known
	for _, b := range p.Backends {
		if b.Backend != backends.CPU && b.DeviceSplits > 0 {
			dev = append(dev, summary.BackendName(b.Backend))
			read = read || len(b.Ops) > 0
			for _, l := range b.Layers {
				onDevice[l] = true
			}
		}
	}
	// The CPU's share of a token as the views lead with it: each backend's part, a
	// device's from its splits seen done.
	lead := summary.LeadOf(p)
	if len(dev) == 0 || lead == nil || decodes(p) < minDecodes {
		return summary.Finding{}, false
	}
	var cpu summary.Part
	var device float64
	for _, part := range lead.Parts {
		if part.Backend == backends.CPU {
			cpu = part
		} else {
			device += part.Device
		}
	}
	if cpu.Share < fallbackShare {
		return summary.Finding{}, false
	}
	devs := strings.Join(dev, ", ")
	f := summary.Finding{
		ID: "cpu-fallback", Severity: "warning",
		Title: fmt.Sprintf("The CPU computes %s of a token that offloads to %s", pct(cpu.Share), devs),
		Advice: "Nodes the GPU does not compute run on the CPU, in splits of their own, with copies between. Offload every layer and the output layer " +
			"(-ngl 99, gpuLayers \"max\") where the model fits in the GPU's memory, and look in the engine's log for ops the GPU backend does not support.",
		Evidence: []string{fmt.Sprintf("per %s: %.2f ms of CPU splits, at most %.2f ms of device work", lead.Unit, cpu.Compute*1e3, device*1e3)},
	}
	ph := phase(p, "decode")
	if ph == nil || len(ph.Ops) == 0 {
		return f, true
	}
	var top []string
	for _, op := range ph.Ops[:min(3, len(ph.Ops))] {
		top = append(top, fmt.Sprintf("%s %s", op.Op, pct(op.Share)))
	}
	f.Evidence = append(f.Evidence, "on the CPU, by share of its traced graph time: "+strings.Join(top, ", "))
	// The CPU's layers whose matmuls no device computes, and those whose it does.
	var left, shared []int
	var leftShare, sharedShare float64
	for _, l := range ph.Layers {
		switch {
		case l.Layer < 0:
		case onDevice[l.Layer]:
			shared, sharedShare = append(shared, l.Layer), sharedShare+l.Share
		default:
			left, leftShare = append(left, l.Layer), leftShare+l.Share
		}
	}
	if !read {
		if len(left) > 0 {
			f.Evidence = append(f.Evidence, "layers computed on the CPU: "+layers(left))
		}
		return f, true
	}
	var title, advice []string
	var fell float64 // the share of the CPU's time the causes named hold
	if len(left) > 0 {
		title = append(title, layersNoun(left)+" left on the CPU")
		advice = append(advice, fmt.Sprintf("The GPU layers setting left %s on the CPU: offload more (-ngl, gpuLayers; -ngl 99 or gpuLayers \"max\" for every layer and the output layer) where the model fits in the GPU's memory.", layersNoun(left)))
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s, %s of the CPU's traced decode time: left on the CPU by the GPU layers setting, with no matmul on %s", layersNoun(left), pct(leftShare), devs))
		fell += leftShare
	}
	if names, shares := fallenOps(ph, onDevice); names != "" {
		title = append(title, fmt.Sprintf("ops %s did not run (%s)", devs, names))
		advice = append(advice, fmt.Sprintf("In the layers %s computes, the CPU ran %s: the backend lacks those ops, or them on these types (the engine's log at load names the weights it cannot use). "+
			"Another quantisation of the model, or a newer build of the engine, may run them on the GPU.", devs, names))
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s, %s of the CPU's traced decode time: ops %s did not run in layers it computes (%s)", layersNoun(shared), pct(sharedShare), devs, shares))
		fell += sharedShare
	}
	if len(title) == 0 {
		return f, true
	}
	f.Title += ": " + strings.Join(title, ", and ")
	f.Advice = "Nodes the GPU does not compute run on the CPU, in splits of their own, with copies between. " + strings.Join(advice, " ")
	if rest := 1 - fell; rest >= 0.005 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the rest, %s: the input's embedding rows, which the CPU always computes, and nodes whose names give no layer", pct(rest)))
	}
	return f, true
}

// fallenOps names the ops the CPU computed in phase ph's layers that are onDevice, those
// of the most time first, alone and with their shares of the phase's traced graph time:
// ops the device's backend did not run. It reads the heatmap, which holds the phase's
// busiest ops; "" where none of them fell.
func fallenOps(ph *summary.Phase, onDevice map[int]bool) (names, shares string) {
	type fallen struct {
		op   string
		secs float64
	}
	var ops []fallen
	if m := ph.OpLayer; m != nil {
		for i, op := range m.Ops {
			var secs float64
			for j, l := range m.Layers {
				if onDevice[l] {
					secs += m.Seconds[i][j]
				}
			}
			if secs > 0 {
				ops = append(ops, fallen{op, secs})
			}
		}
	}
	slices.SortStableFunc(ops, func(x, y fallen) int { return cmp.Compare(y.secs, x.secs) })
	total := max(cmp.Or(ph.GraphSeconds, ph.NodeSeconds), 1e-12)
	var n, s []string
	for _, o := range ops[:min(len(ops), 5)] {
		n = append(n, o.op)
		s = append(s, o.op+" "+pct(o.secs/total))
	}
	return strings.Join(n, ", "), strings.Join(s, ", ")
}

// layersNoun is "layer 3" or "layers 0–11, 14".
func layersNoun(ls []int) string {
	if len(ls) == 1 {
		return "layer " + strconv.Itoa(ls[0])
	}
	return "layers " + layers(ls)
}

// layers lists ascending layer numbers, runs as ranges: "0–11, 14".
func layers(ls []int) string {
	var out []string
	for i := 0; i < len(ls); {
		j := i
		for j+1 < len(ls) && ls[j+1] == ls[j]+1 {
			j++
		}
		r := strconv.Itoa(ls[i])
		if j > i {
			r += "–" + strconv.Itoa(ls[j])
		}
		out = append(out, r)
		i = j + 1
	}
	return strings.Join(out, ", ")
}

// decodes is the llama_decode calls p made, in every phase.
func decodes(p *summary.Process) int64 {
	var n int64
	for _, ph := range p.Phases {
		n += ph.Decodes
	}
	return n
}

// seen returns p's phase of that name, traced or not.
func seen(p *summary.Process, name string) *summary.Phase {
	for _, ph := range p.Phases {
		if ph.Name == name {
			return ph
		}
	}
	return nil
}

// uneven: MoE routing concentrates on a few experts.
func uneven(p *summary.Process) (summary.Finding, bool) {
	var worst *summary.MoELayer
	n := 0
	for i := range p.MoE {
		l := &p.MoE[i]
		if l.Imbalance >= moeImbalance {
			n++
			if worst == nil || l.Imbalance > worst.Imbalance {
				worst = l
			}
		}
	}
	if worst == nil {
		return summary.Finding{}, false
	}
	var total, top int64
	for _, c := range worst.Selections {
		total += c
		top = max(top, c)
	}
	return summary.Finding{
		ID: "moe-uneven", Severity: "info",
		Title:  "MoE routing is uneven",
		Advice: "A few experts take most tokens. Keep the hot experts in the fastest memory (or on the GPU when offloading experts), and expect throughput to follow the busiest expert.",
		Evidence: []string{
			fmt.Sprintf("%d of %d MoE layers with a coefficient of variation of %.1f or more", n, len(p.MoE), moeImbalance),
			fmt.Sprintf("layer %d: %.2f; its busiest expert took %s of %d selections", worst.Layer, worst.Imbalance, pct(float64(top)/float64(max(total, 1))), total),
		},
	}, true
}

// overhead: an op with a real share of the time runs far below its roof.
func overhead(p *summary.Process) (summary.Finding, bool) {
	var found []string
	for _, ph := range p.Phases {
		// Off the CPU, an op runs slow for a reason the contention finding gives.
		if ph.TracedGraphs < minGraphs || ph.CPU != nil && ph.CPU.Starved ||
			ph.Sched.ThreadTime > 0 && (ph.Sched.OffCPU+ph.Sched.RunQueue)/ph.Sched.ThreadTime >= contentionShare {
			continue
		}
		for _, o := range ph.Ops {
			if o.Bound == "overhead" && o.Share >= overheadShare {
				found = append(found, fmt.Sprintf("%s %s (%s): %s of %s graph time at %s of its roof, %.1f µs a call",
					o.Op, o.Weight, ph.Name, pct(o.Share), ph.Name, pct(o.PeakFrac), o.MeanUS))
			}
		}
	}
	if len(found) == 0 {
		return summary.Finding{}, false
	}
	return summary.Finding{
		ID: "overhead-bound", Severity: "info",
		Title:    "Ops far below their roof: dispatch and synchronisation dominate",
		Advice:   "These ops move too little data or do too little work per call to approach the machine's limits; their time is per-call overhead and thread synchronisation. Fewer threads for small batches, larger batches (more parallel sequences), or fused kernels in a newer llama.cpp reduce it.",
		Evidence: found[:min(len(found), 5)],
	}, true
}
