package summary

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
)

// Limits bound the aggregator's memory.
const (
	maxProcesses  = 64                 // the least recently seen beyond these are forgotten (and see Expire)
	maxTraces     = 8192               // trace → phase entries remembered, for nodes whose decode came earlier
	maxNodes      = 8192               // nodes kept of the timeline's graph
	maxWork       = 512                // device splits and copies kept of the timeline's decode
	timelineEvery = int64(time.Second) // the timeline's graph is replaced at most this often
	rateSeconds   = 600                // seconds of tokens-per-second history
	maxOps        = 256                // op rows per phase; the rest count as "other"
	maxLayers     = 1024               // layers per phase
	maxExperts    = 4096               // experts per MoE layer
	outside       = "outside decode"
	prefill       = "prefill"
	decode        = "decode"
	mixed         = "mixed"   // a prompt's chunk beside other sequences' next tokens
	encode        = "encode"  // whisper.cpp's encoder passes
	compute       = "compute" // computations of no known runtime
	unknownValue  = "unknown"
)

// Aggregator folds pdata into per-process aggregates. It is not safe for concurrent
// use.
type Aggregator struct {
	procs  map[string]*proc
	phases *phaseMemo
	now    func() time.Time // when a process is seen; tests set it
}

// New returns an empty aggregator.
func New() *Aggregator {
	return &Aggregator{procs: map[string]*proc{}, phases: newPhaseMemo(maxTraces), now: time.Now}
}

// Expire forgets the processes last seen before cutoff: their spans and metrics stopped
// coming, as they do once a process exits. The live view calls it, so that a day of short
// runs (llama-bench every few minutes) keeps only the latest of them; a report, which
// folds a file at once, keeps every process up to maxProcesses. It returns how many it
// forgot.
func (a *Aggregator) Expire(cutoff time.Time) int {
	n := 0
	for id, p := range a.procs {
		if p.lastSeen.Before(cutoff) {
			delete(a.procs, id)
			n++
		}
	}
	return n
}

// ProcessID identifies the process a resource describes, as a Process's ID: its host,
// collector, pid and executable.
func ProcessID(attrs pcommon.Map) (id, pid string) {
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	pid = str(schema.ResourceProcessPID)
	return strings.Join([]string{str(schema.ResourceHostName), str(schema.ResourceServiceInstanceID), pid, str(schema.ResourceProcessExecutablePath)}, "\x00"), pid
}

// touch notes that a process the view has is still seen, by its resource: a process
// sends metrics every collection interval whether or not it computes.
func (a *Aggregator) touch(res pcommon.Resource) {
	id, _ := ProcessID(res.Attributes())
	if p := a.procs[id]; p != nil {
		p.lastSeen = a.now()
	}
}

type opKey struct{ op, weight string }

type proc struct {
	id, title, model string
	runtime          string
	resource         []KV
	lastSeen         time.Time
	nextWindow       time.Time // when its next sampling window opens, as last told
	phases           map[string]*phase
	latency          *logHistogram
	requests         Requests
	prefixes         map[int64]computed // prompt starts computed, to the last request that computed each
	jobs             Jobs
	rtf              *logHistogram // real-time factors, as if seconds
	ttft, tpot, wait *logHistogram
	gapMedian        *logHistogram // requests' median gaps between output tokens
	gapMax           *logHistogram // and their longest
	rate             []Rate        // ring by second
	serve            Serving
	// nextTokens and nextSecs are the next tokens its decode and mixed steps computed,
	// and their time.
	nextTokens     int64
	nextSecs       float64
	roofs, derived Roofs
	timeline       *Timeline
	moeSpans       map[int][]int64
	moeMetric      map[int][]int64
	backends       map[string]*Backend
	loaded         []string
	software       string // the software driver its device runs on
	copies         map[[2]string]*Copy
	counters       map[string]bool
	threads        int64      // the most threads a graph was computed with
	quota          quotaState // the cgroup CPU quota
	cpus           CPUs       // the CPUs it may run on, Threads aside
	// idleTime and cpusTime are the seconds those CPUs sat idle while it computed, and
	// theirs, ownTime its own meanwhile (0: not known): Idle's and Others' figures.
	idleTime, cpusTime, ownTime float64
	cold                        coldState // its first graphs' major page faults, and those after idle spells
	lastGraph                   int64     // when its latest graph ended, ns
	simd                        SIMD
	end                         *End // how it ended, from its process span
	cut                         bool // a step of it was cut short by its end
}

type phase struct {
	Phase
	cpu ThreadsCPU
	// Seconds of the graphs whose threads had their CPUs, and tokens of those and of
	// the contended ones: the cost of contention is measured against the former.
	quietSeconds                              float64
	quietGraphs, quietTokens, contendedTokens int64
	widths                                    [len(schema.Widths)]*widthState // decode's steps by width
	deepest                                   Deepest
	depth                                     depthSums
	ops                                       map[opKey]*Op
	layers                                    map[int]float64
	opLayer                                   map[string]map[int]float64 // by op
}

func (a *Aggregator) process(res pcommon.Resource) *proc {
	attrs := res.Attributes()
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	id, pid := ProcessID(attrs)
	p := a.procs[id]
	if p == nil {
		if len(a.procs) >= maxProcesses {
			a.forgetOldest()
		}
		p = &proc{id: id, phases: map[string]*phase{}, latency: newLogHistogram(), ttft: newLogHistogram(),
			gapMedian: newLogHistogram(), gapMax: newLogHistogram(), tpot: newLogHistogram(), wait: newLogHistogram(), rtf: newLogHistogram(),
			moeSpans: map[int][]int64{}, moeMetric: map[int][]int64{},
			backends: map[string]*Backend{}, copies: map[[2]string]*Copy{}, counters: map[string]bool{}}
		a.procs[id] = p
	}
	// The model and context become known after the first decodes: refresh.
	p.title = cmp.Or(str(schema.ResourceServiceName), str(schema.ResourceProcessExecutableName), "process") + " (pid " + cmp.Or(pid, "?") + ")"
	if h := str(schema.ResourceHostName); h != "" {
		p.title += " on " + h
	}
	p.model = cmp.Or(str(schema.ResourceLlamaModelName), str(schema.ResourceLlamaModelPath), whisperModel(str), p.model)
	p.runtime = cmp.Or(str(schema.ResourceGGMLRuntime), p.runtime)
	p.software = cmp.Or(str(schema.ResourceGGMLDeviceSoftware), p.software)
	p.simd = SIMD{Build: cmp.Or(str(schema.ResourceGGMLCPUSIMD), p.simd.Build), Host: cmp.Or(str(schema.ResourceHostCPUSIMD), p.simd.Host)}
	if v, ok := attrs.Get(schema.ResourceGGMLBackendsLoaded); ok && v.Type() == pcommon.ValueTypeSlice {
		p.loaded = p.loaded[:0]
		for i := 0; i < v.Slice().Len() && i < 16; i++ {
			p.loaded = append(p.loaded, v.Slice().At(i).AsString())
		}
	}
	p.resource = p.resource[:0]
	attrs.Range(func(k string, v pcommon.Value) bool {
		p.resource = append(p.resource, KV{k, v.AsString()})
		return len(p.resource) < 64
	})
	slices.SortFunc(p.resource, func(x, y KV) int { return strings.Compare(x.Key, y.Key) })
	p.lastSeen = a.now()
	return p
}

// whisperModel names a whisper.cpp model from its resource attributes: "whisper tiny
// (F16)"; "" for other runtimes'.
func whisperModel(str func(string) string) string {
	t := str(schema.ResourceWhisperModelType)
	if t == "" {
		return ""
	}
	if ft := str(schema.ResourceWhisperModelFileType); ft != "" {
		return "whisper " + t + " (" + ft + ")"
	}
	return "whisper " + t
}

func (a *Aggregator) forgetOldest() {
	var oldest *proc
	for _, p := range a.procs {
		if oldest == nil || p.lastSeen.Before(oldest.lastSeen) {
			oldest = p
		}
	}
	delete(a.procs, oldest.id)
}

func (p *proc) phase(name string) *phase {
	ph := p.phases[name]
	if ph == nil {
		ph = &phase{Phase: Phase{Name: name}, ops: map[opKey]*Op{}, layers: map[int]float64{},
			opLayer: map[string]map[int]float64{}}
		p.phases[name] = ph
	}
	return ph
}

// Traces folds a batch of spans in.
func (a *Aggregator) Traces(td ptrace.Traces) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		p := a.process(rs.Resource())
		// Decodes first: their phase is their nodes' phase.
		schema.EachSpan(rs, func(s ptrace.Span) {
			switch {
			case s.Name() == schema.SpanDecode:
				a.decode(p, s)
			case s.Name() == schema.SpanTranscription:
				p.job(s)
			case s.Name() == schema.SpanProcess:
				p.exit(s)
			case schema.Str(s.Attributes(), schema.GenAIOperationName) != "":
				p.request(s)
			case isStep(s):
				a.step(p, s)
			}
		})
		graphs := map[pcommon.SpanID]*graphRef{}
		schema.EachSpan(rs, func(s ptrace.Span) {
			switch s.Name() {
			case schema.SpanDecode, schema.SpanTranscription, schema.SpanProcess:
			case schema.SpanGraph:
				graphs[s.SpanID()] = a.graph(p, s)
			case schema.SpanSplit:
				a.split(p, s)
			case schema.SpanDevice:
				a.device(p, s)
			case schema.SpanCopy:
				a.copy(p, s)
			default:
				if !isStep(s) && s.Name() != schema.SpanSchedCompute { // the latter: older collectors' scheduler spans
					a.node(p, s, graphs[s.ParentSpanID()])
				}
			}
		})
		for _, g := range graphs {
			g.addTimes()
			if g.timeline != nil && len(g.timeline.Nodes) > 0 {
				a.deviceWork(rs, g)
				p.timeline = g.timeline
			}
		}
	}
}
