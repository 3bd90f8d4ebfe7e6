package signals

import (
	"cmp"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/cgroup"
	"github.com/profinfer/profinfer/internal/cpus"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
)

// tokenTypes are the kinds of the request token counter, in the order of reqTokens.
var tokenTypes = [...]metadata.AttributeGenAiTokenType{metadata.AttributeGenAiTokenTypeInput,
	metadata.AttributeGenAiTokenTypeCachedInput, metadata.AttributeGenAiTokenTypeOutput}

type opKey struct{ op, weight, typ string }

// processMetrics is the cumulative state of one process.
type processMetrics struct {
	proc      Origin
	ops       map[opKey]*opStats
	bounds    map[boundKey]int64
	ctrBounds map[ctrBoundKey]int64
	threads   map[threadKey]*events.Counters
	// threadSeen is, by tid, the graph (of graphs) that last counted the thread: it
	// bounds threads at maxThreads.
	threadSeen map[uint32]uint64
	graphs     uint64
	tokens     [2]int64 // by phase: prefill (prompts), decode (next tokens), mixed decodes' in theirs
	// Decodes' duration by phase: prefill, mixed, and decode by width (schema.Widths).
	prefillDur, mixedDur *histogram
	decodeDur            [len(schema.Widths)]*histogram
	// The traced graphs' threads' CPU time and thread time (threads × wall), by phase, ns.
	graphCPU, graphThreads [phases]float64
	window                 float64 // seconds until its next sampling window, if windowed
	windowed               bool
	// Requests: GenAI server histograms, tokens by kind, and batch occupancy.
	ttft, tpot, duration *histogram
	reqTokens            [3]int64 // by tokenTypes
	contextFull          [2]int64 // requests that reached their context: truncated, shifted
	kvCells              int64    // after its latest decode; 0 before one said
	batchSeqs, batchToks *histogram
	moe                  map[int][]int64     // MoE layer -> selections per expert
	splits               map[string]*span    // by backend
	devices              map[string]*device  // by backend: the device's side of its splits
	deviceOps            map[deviceOp]uint64 // ns the devices timed, by backend and op
	copies               map[copyKey]*copied // by source and destination backend
	steps                map[string]*span    // scheduler computations of runtimes without llama_decode, by phase
	jobs                 jobs
	quota                cgroup.CPU // as last read
	cpus                 cpus.Count // the CPUs it may run on, as last read
	// idleTime and cpusTime are the seconds those CPUs sat idle, and theirs, over the
	// spans it computed in; ownTime its own, unless ownLost: a span's was not known.
	idleTime, cpusTime, ownTime float64
	ownLost                     bool
	exited                      bool // emit once more, then drop
}

// jobs sums whisper's transcriptions: how many, the audio given and the time taken.
type jobs struct {
	count       int64
	audio, time float64 // seconds
}

// span counts calls and their time.
type span struct {
	count int64
	ns    uint64
}

// addSpan counts one span of ns nanoseconds under key k of m.
func addSpan[K comparable](m map[K]*span, k K, ns uint64) {
	st := m[k]
	if st == nil {
		st = &span{}
		m[k] = st
	}
	st.count++
	st.ns += ns
}

// device sums a device's time on the splits whose end was seen, and the CPU's waits.
type device struct{ ns, wait uint64 }

type deviceOp struct{ backend, op string }

type copyKey struct{ src, dst string }

type copied struct {
	ns    uint64
	bytes int64
}

type opStats struct {
	count        int64
	dur          *histogram
	flops, bytes float64
	sched        events.CPUSched
	barrierWait  uint64 // ns
	counters     events.Counters
	counted      bool // some node had complete counters
}

type boundKey struct {
	op    string
	bound metadata.AttributeGgmlRooflineBound
}

type ctrBoundKey struct {
	op    string
	bound metadata.AttributeGgmlCountersBound
}

type threadKey struct {
	tid   uint32
	scope metadata.AttributeGgmlScope
}

var bounds = map[roofline.Bound]metadata.AttributeGgmlRooflineBound{
	roofline.Memory:      metadata.AttributeGgmlRooflineBoundMemory,
	roofline.Compute:     metadata.AttributeGgmlRooflineBoundCompute,
	roofline.Overhead:    metadata.AttributeGgmlRooflineBoundOverhead,
	roofline.Unexplained: metadata.AttributeGgmlRooflineBoundUnexplained,
	roofline.Starved:     metadata.AttributeGgmlRooflineBoundStarved,
}

// Telemetry is the receiver's own health, exported beside the process metrics.
type Telemetry struct {
	EventsReceived, EventsDropped, GraphsDropped, GraphsTraced, SpansDropped uint64
	// AttachFailures counts processes not profiled, by reason.
	AttachFailures [metadata.AttributeProfinferAttachReasonOther + 1]uint64
	ProbesAttached int
}

// Metrics accumulates cumulative metrics per process. It is not safe for concurrent use.
type Metrics struct {
	roofs    roofline.Roofs // zero peaks: no classification; exported with each process
	counters *Counters      // nil: no perf counters
	mb       *metadata.MetricsBuilder
	start    pcommon.Timestamp
	procs    map[int]*processMetrics
}

// NewMetrics returns an accumulator whose cumulative sums start now. Nodes are classified
// under the roofline of roofs, when they are known, and by counters, when there are any.
func NewMetrics(cfg metadata.MetricsBuilderConfig, set receiver.Settings, roofs roofline.Roofs, counters *Counters) *Metrics {
	start := pcommon.NewTimestampFromTime(time.Now())
	return &Metrics{
		roofs:    roofs,
		counters: counters,
		mb:       metadata.NewMetricsBuilder(cfg, set, metadata.WithStartTime(start)),
		start:    start,
		procs:    map[int]*processMetrics{},
	}
}

func (m *Metrics) process(p *Origin) *processMetrics {
	pm := m.procs[p.PID]
	if pm != nil {
		pm.proc = *p // the model may have been found since
		return pm
	}
	pm = &processMetrics{proc: *p, ops: map[opKey]*opStats{}, bounds: map[boundKey]int64{},
		ctrBounds: map[ctrBoundKey]int64{}, threads: map[threadKey]*events.Counters{}, threadSeen: map[uint32]uint64{}, moe: map[int][]int64{},
		splits: map[string]*span{}, devices: map[string]*device{}, deviceOps: map[deviceOp]uint64{}, copies: map[copyKey]*copied{},
		steps:      map[string]*span{},
		prefillDur: newHistogram(decodeBounds), mixedDur: newHistogram(decodeBounds),
		ttft: newHistogram(ttftBounds), tpot: newHistogram(tpotBounds), duration: newHistogram(durationBounds),
		batchSeqs: newHistogram(seqBounds), batchToks: newHistogram(tokenBounds)}
	m.procs[p.PID] = pm
	return pm
}

// Step counts a step's tokens and time where it is a prefill or decode (llama_decode,
// Ollama's engine's batches), and every split, copy and node of its graphs. A step the
// process ended inside counts for its graphs alone: it computed no token.
func (m *Metrics) Step(p *Origin, d *assemble.Step) {
	pm := m.process(p)
	ph := phaseIndex(d)
	if ph >= 0 && !d.Cut {
		dur := float64(d.End-d.Start) / 1e9
		switch {
		case d.Kind == assemble.SchedCompute: // Ollama's own engine's batches, of one phase
			pm.tokens[ph] += int64(d.Tokens)
		default:
			mix := d.Mixed()
			pm.tokens[prefillPhase] += int64(mix.PromptTokens)
			pm.tokens[decodePhase] += int64(mix.NextTokens)
		}
		switch ph {
		case prefillPhase:
			pm.prefillDur.add(dur)
		case mixedPhase:
			pm.mixedDur.add(dur)
		default:
			w := schema.Width(d.Mixed().NextSeqs)
			if pm.decodeDur[w] == nil {
				pm.decodeDur[w] = newHistogram(decodeBounds)
			}
			pm.decodeDur[w].add(dur)
		}
	}
	if d.Kind == assemble.SchedCompute && !d.Cut {
		addSpan(pm.steps, d.Phase, d.End-d.Start)
	}
	if d.Mix.KVCells > 0 {
		pm.kvCells = int64(d.Mix.KVCells)
	}
	if d.Batch.N > 0 {
		pm.batchSeqs.add(float64(d.Batch.N))
		pm.batchToks.add(float64(d.Tokens))
	}
	for _, sl := range d.Splits {
		addSpan(pm.splits, sl.Backend, sl.End-sl.Start)
		if sl.Device && sl.Done != 0 {
			dv := pm.devices[sl.Backend]
			if dv == nil {
				dv = &device{}
				pm.devices[sl.Backend] = dv
			}
			dv.ns += sl.Done - sl.Start
			dv.wait += sl.Wait
		}
		for _, n := range sl.Timed {
			if n.Known {
				pm.deviceOps[deviceOp{sl.Backend, n.Info.Op}] += n.NS
			}
		}
	}
	for _, c := range d.Copies {
		k := copyKey{c.Src, c.Dst}
		st := pm.copies[k]
		if st == nil {
			st = &copied{}
			pm.copies[k] = st
		}
		st.ns += c.End - c.Start
		st.bytes += c.Bytes
	}
	for _, g := range d.Graphs {
		if g.CPU.Known && !g.CPU.Perturbed && ph >= 0 {
			pm.graphCPU[ph] += float64(g.CPU.Run)
			pm.graphThreads[ph] += float64(g.NThreads) * float64(g.End-g.Start)
		}
		m.graph(pm, g)
	}
}

// The phases of llama.phase, as the metrics index them.
const (
	prefillPhase = iota
	decodePhase
	mixedPhase
	phases
)

// phaseNames are the phases' llama.phase values, by index.
var phaseNames = [phases]metadata.AttributeLlamaPhase{metadata.AttributeLlamaPhasePrefill,
	metadata.AttributeLlamaPhaseDecode, metadata.AttributeLlamaPhaseMixed}

// phaseIndex is step d's phase's index: its Mix's for a llama_decode, the runtime's
// name for another step; -1 for whisper's encoder and decoder passes and graphs of no
// known runtime.
func phaseIndex(d *assemble.Step) int {
	name := d.Phase
	if d.Kind == assemble.LlamaDecode {
		name = d.Mixed().Phase()
	}
	switch name {
	case assemble.PhasePrefill:
		return prefillPhase
	case assemble.PhaseDecode:
		return decodePhase
	case assemble.PhaseMixed:
		return mixedPhase
	}
	return -1
}

// Job counts a finished job (whisper's transcription): the audio it was given, its time.
func (m *Metrics) Job(p *Origin, j *assemble.Job) {
	pm := m.process(p)
	pm.jobs.count++
	pm.jobs.audio += float64(j.Samples) / SampleRate
	pm.jobs.time += float64(j.End-j.Start) / 1e9
}

// Request counts a finished request's tokens and times.
func (m *Metrics) Request(p *Origin, r *requests.Request) {
	if r.Warmup() { // no client's: it would skew time to first token at every load
		return
	}
	pm := m.process(p)
	pm.reqTokens[0] += int64(r.Prompt)
	pm.reqTokens[1] += int64(r.Cached)
	pm.reqTokens[2] += int64(r.Output)
	pm.duration.add(float64(r.End-r.Start) / 1e9)
	switch {
	case r.Full && r.Shifts > 0:
		pm.contextFull[1]++
	case r.Full:
		pm.contextFull[0]++
	}
	if r.Output > 0 {
		pm.ttft.add(float64(r.TTFT()) / 1e9)
	}
	if r.Output > 1 {
		pm.tpot.add(float64(r.TPOT()) / 1e9)
	}
}

// Graph counts every node of a graph computed outside llama_decode.
func (m *Metrics) Graph(p *Origin, g *assemble.Graph) { m.graph(m.process(p), g) }

func (m *Metrics) graph(pm *processMetrics, g *assemble.Graph) {
	if m.counters != nil {
		m.threadCounters(pm, g)
	}
	for i, r := range g.Routings {
		layer := Layer(r.Name)
		if layer < 0 { // unnamed tensors: the MoE layers in graph order
			layer = i
		}
		if layer < maxLayers {
			pm.route(layer, r)
		}
	}
	kept := KeptBytes(g)
	for _, n := range g.Nodes {
		k := opKey{"unknown", "none", "unknown"}
		if n.Info != nil {
			k = opKey{n.Info.Op, cmp.Or(WeightType(n.Info), "none"), n.Info.Type}
		}
		st := pm.ops[k]
		if st == nil {
			st = &opStats{dur: newHistogram(opBounds)}
			pm.ops[k] = st
		}
		secs := float64(n.End-n.Start) / 1e9
		st.count++
		st.dur.add(secs)
		st.sched.OffCPU += n.Sched.OffCPU
		st.sched.RunQueue += n.Sched.RunQueue
		st.sched.Preemptions += n.Sched.Preemptions
		st.sched.Migrations += n.Sched.Migrations
		if len(n.Threads) == g.NThreads {
			st.barrierWait += BarrierWait(n)
		}
		if m.counters != nil && complete(n) {
			st.counters.Add(n.Counters)
			st.counted = true
			if c := m.counters; c.classify {
				if b, _, _, ok := c.classifier.Classify(n.Counters[:len(c.names)]); ok {
					pm.ctrBounds[ctrBoundKey{k.op, metadata.MapAttributeGgmlCountersBound[string(b)]}]++
				}
			}
		}
		if n.Info == nil || n.Info.FLOPs == 0 {
			continue
		}
		w, known := n.Info.Work.Attending(g.Cells)
		if !known {
			continue
		}
		st.flops += w.FLOPs
		st.bytes += w.Bytes
		if m.roofs.Known() {
			pm.bounds[boundKey{k.op, bounds[classify(w, n, g, kept, m.roofs.Peaks).Bound]}]++
		}
	}
}

// Bounds on what a process's MoE routing can add: expert ids are read from the process's
// memory, where a bad read must not size a slice, and layers are named by tensors.
const (
	maxExperts = 4096 // experts per layer; ids past it are not counted
	maxLayers  = 1024 // MoE layers; those past it are not counted
)

// route counts a MoE layer's expert selections. The layer has at least r.NExpert experts,
// so that those never chosen count as zero.
func (pm *processMetrics) route(layer int, r *assemble.Routing) {
	c := pm.moe[layer]
	grow := func(n int) {
		if len(c) < n {
			c = append(c, make([]int64, n-len(c))...)
		}
	}
	grow(min(r.NExpert, maxExperts))
	for _, e := range r.Experts {
		if e >= 0 && e < maxExperts {
			grow(int(e) + 1)
			c[e]++
		}
	}
	pm.moe[layer] = c
}

// Imbalance is the coefficient of variation of counts: standard deviation over mean, 0
// for perfectly even counts (or none).
func Imbalance(counts []int64) float64 {
	var sum float64
	for _, c := range counts {
		sum += float64(c)
	}
	if sum == 0 {
		return 0
	}
	mean := sum / float64(len(counts))
	var ss float64
	for _, c := range counts {
		ss += (float64(c) - mean) * (float64(c) - mean)
	}
	return math.Sqrt(ss/float64(len(counts))) / mean
}

// maxThreads bounds the threads a process's counters are summed for, each a series
// of ggml.thread.counter: a process whose threadpool is made per graph (ggml's without
// OpenMP) has new threads every graph.
const maxThreads = 256

// threadCounters adds each thread's counts in g's nodes, and outside nodes before g. A
// thread new past maxThreads has the process's threads that g did not count forgotten
// (threads exited since, in a process that makes them per graph).
func (m *Metrics) threadCounters(pm *processMetrics, g *assemble.Graph) {
	pm.graphs++
	add := func(tid uint32, scope metadata.AttributeGgmlScope, d events.Counters) {
		if _, ok := pm.threadSeen[tid]; !ok && len(pm.threadSeen) >= maxThreads {
			pm.forgetThreads()
		}
		pm.threadSeen[tid] = pm.graphs
		k := threadKey{tid, scope}
		c := pm.threads[k]
		if c == nil {
			c = &events.Counters{}
			pm.threads[k] = c
		}
		c.Add(d)
	}
	for _, o := range g.Outside {
		add(o.TID, metadata.AttributeGgmlScopeOutside, o.Counters)
	}
	for _, n := range g.Nodes {
		for _, t := range n.Threads {
			if t.Counted {
				add(t.TID, metadata.AttributeGgmlScopeNode, t.Counters)
			}
		}
	}
}

// forgetThreads forgets the threads that the graph being counted did not count.
func (pm *processMetrics) forgetThreads() {
	for tid, seen := range pm.threadSeen {
		if seen == pm.graphs {
			continue
		}
		delete(pm.threadSeen, tid)
		for _, scope := range []metadata.AttributeGgmlScope{metadata.AttributeGgmlScopeNode, metadata.AttributeGgmlScopeOutside} {
			delete(pm.threads, threadKey{tid, scope})
		}
	}
}

// Quota sets what pid's cgroup CPU quota and throttling were last read as.
func (m *Metrics) Quota(pid int, c cgroup.CPU) {
	if pm := m.procs[pid]; pm != nil {
		pm.quota = c
	}
}

// CPUs sets what pid may run on, as last read.
func (m *Metrics) CPUs(pid int, c cpus.Count) {
	if pm := m.procs[pid]; pm != nil {
		pm.cpus = c
	}
}

// Idle adds how long the CPUs pid may run on sat idle over a span in which it computed,
// their seconds in all, and its own CPU time (negative: not known).
func (m *Metrics) Idle(pid int, idle, all, own float64) {
	if pm := m.procs[pid]; pm != nil {
		pm.idleTime += idle
		pm.cpusTime += all
		pm.ownTime += max(own, 0)
		pm.ownLost = pm.ownLost || own < 0
	}
}

// Window sets when pid's next sampling window opens, as seconds from now (0: one is open
// or due).
func (m *Metrics) Window(pid int, in time.Duration) {
	if pm := m.procs[pid]; pm != nil {
		pm.window = max(in.Seconds(), 0)
		pm.windowed = true
	}
}

// Forget drops a process that has exited once its metrics have been emitted one last
// time, so that what it did since the previous export is not lost.
func (m *Metrics) Forget(pid int) {
	if pm := m.procs[pid]; pm != nil {
		pm.exited = true
	}
}
