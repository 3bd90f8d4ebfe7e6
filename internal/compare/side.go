package compare

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/summary"
)

// Bounds of a side's memory besides its phases' blocks and identities.
const (
	maxProcesses = 64      // processes remembered, for the errors that name them
	maxSpans     = 1 << 14 // step and split spans remembered, for children in later batches
	maxTraces    = 1 << 13 // traces' latest steps
	maxStems     = 1 << 14 // tensor names' stems
	maxThreads   = 16      // distinct graph thread counts
	maxSettings  = 16      // distinct values of a context's setting, a phase
)

// Side folds one side of a comparison: the spans and metrics its selection takes, in the
// order the files hold them. It is a report.Sink; its memory does not grow with the
// input: phases keep at most maxBlocks blocks and a bounded table of nodes each, and the
// memos that link spans to their steps are rings.
type Side struct {
	Name string // A or B
	Sel  Selection

	agg    *summary.Aggregator // the setup's figures: roofs, quota, backends, resource
	phases map[string]*phaseFold
	spans  *memo[pcommon.SpanID]
	traces *memo[pcommon.TraceID]
	stems  map[string]string
	ops    map[[2]string]string // op and fused op → label

	// origin is the first span's start (unix ns), once a selected process was seen;
	// from and to the time range resolved against it.
	origin, from, to int64
	seen, matched    map[int64]process // in the files; taken by the process selector
	took             map[int64]process // matched and computed a step in the range
	extent           [2]int64          // matched processes' steps, before the range
	first, last      int64             // the steps taken

	threads          []int64   // graph thread counts (ggml.threads)
	described, flash int64     // nodes described; FLASH_ATTN_EXT among them
	kv               [2]string // the types written into the K and V caches
	strays           int64     // spans under no step or graph of their batch

	graphs map[pcommon.SpanID]*graphCtx // the batch's graphs: traced ones taken, or nil
}

// NewSide returns an empty side named name (A or B) that takes what sel selects.
func NewSide(name string, sel Selection) *Side {
	return &Side{Name: name, Sel: sel, agg: summary.New(), phases: map[string]*phaseFold{},
		spans: newMemo[pcommon.SpanID](maxSpans), traces: newMemo[pcommon.TraceID](maxTraces),
		stems: map[string]string{}, ops: map[[2]string]string{},
		seen: map[int64]process{}, matched: map[int64]process{}, took: map[int64]process{},
		extent: [2]int64{math.MaxInt64, math.MinInt64}, first: math.MaxInt64, last: math.MinInt64,
		from: math.MinInt64, to: math.MaxInt64, graphs: map[pcommon.SpanID]*graphCtx{}}
}

// phaseFold is one phase of one side: its steps and its traced graphs in blocks, and its
// nodes' identities.
type phaseFold struct {
	steps, graphs series
	table         table
	settings      [len(contextKeys)][]int64 // the values of each of contextKeys its decodes' contexts had
	cold          int64                     // steps left out: a new context's first graph (record.cold)
}

func (s *Side) phase(name string) *phaseFold {
	ph := s.phases[name]
	if ph == nil {
		ph = &phaseFold{}
		s.phases[name] = ph
	}
	return ph
}

// Traces folds a batch of spans in: the selected processes' steps and what computed
// them, and hands the same to the summary behind the setup.
func (s *Side) Traces(td ptrace.Traces) error {
	rss := td.ResourceSpans()
	keep := make([]bool, rss.Len())
	all := true
	for i := range rss.Len() {
		rs := rss.At(i)
		p := s.note(rs.Resource().Attributes())
		keep[i] = s.Sel.matches(p)
		all = all && keep[i]
		if keep[i] {
			s.fold(rs, p)
		}
	}
	if all && !s.Sel.picksTime() {
		s.agg.Traces(td)
		return nil
	}
	out := ptrace.NewTraces()
	for i := range rss.Len() {
		if !keep[i] {
			continue
		}
		rs := rss.At(i)
		dst := out.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(dst.Resource())
		for j := range rs.ScopeSpans().Len() {
			ss := rs.ScopeSpans().At(j)
			dss := dst.ScopeSpans().AppendEmpty()
			ss.Scope().CopyTo(dss.Scope())
			for k := range ss.Spans().Len() {
				if sp := ss.Spans().At(k); s.inRange(int64(sp.StartTimestamp())) {
					sp.CopyTo(dss.Spans().AppendEmpty())
				}
			}
		}
	}
	s.agg.Traces(out)
	return nil
}

// Metrics hands the selected processes' metrics to the summary: the roofs and the CPU
// quota, which describe the setup whatever the time range.
func (s *Side) Metrics(md pmetric.Metrics) error {
	rms := md.ResourceMetrics()
	all := true
	for i := range rms.Len() {
		all = all && s.Sel.matches(processOf(rms.At(i).Resource().Attributes()))
	}
	if all {
		s.agg.Metrics(md)
		return nil
	}
	out := pmetric.NewMetrics()
	for i := range rms.Len() {
		if rm := rms.At(i); s.Sel.matches(processOf(rm.Resource().Attributes())) {
			rm.CopyTo(out.ResourceMetrics().AppendEmpty())
		}
	}
	s.agg.Metrics(out)
	return nil
}

// note remembers a resource's process, and whether the selection matched it.
func (s *Side) note(attrs pcommon.Map) process {
	p := processOf(attrs)
	if p.pid == 0 {
		return p
	}
	if _, ok := s.seen[p.pid]; ok || len(s.seen) < maxProcesses {
		s.seen[p.pid] = p
	}
	if _, ok := s.matched[p.pid]; s.Sel.matches(p) && (ok || len(s.matched) < maxProcesses) {
		s.matched[p.pid] = p
	}
	return p
}

func (s *Side) inRange(ns int64) bool { return ns >= s.from && ns < s.to }

// check says why the side cannot be compared: its selection took nothing, or more than
// one process where it named none.
func (s *Side) check() error {
	name := fmt.Sprintf("side %s (%s)", s.Name, s.Sel.Spec)
	switch {
	case len(s.seen) == 0:
		return fmt.Errorf("%s: no span of a profiled process in its files (no resource with a process.pid): are they the profinfer receiver's output?", name)
	case len(s.matched) == 0:
		return fmt.Errorf("%s: no process %s in its files; they hold %s", name, s.Sel.processText(), listProcesses(s.seen))
	case s.extent[0] > s.extent[1]:
		return fmt.Errorf("%s: %s computed no llama_decode or step span in its files (profiled while idle, or only its metrics were written)", name, listProcesses(s.matched))
	case len(s.took) == 0:
		return fmt.Errorf("%s: no llama_decode or step span starts in %s; the steps run from %s to %s (%s to %s from the first span)",
			name, s.rangeText(), stamp(s.extent[0]), stamp(s.extent[1]), offset(s.extent[0]-s.origin), offset(s.extent[1]-s.origin))
	case len(s.took) > 1 && !s.Sel.picksProcess():
		return fmt.Errorf("%s: %d processes computed steps in its files, %s: name one with @pid=N or @exe=NAME",
			name, len(s.took), listProcesses(s.took))
	}
	return nil
}

func (s Selection) processText() string {
	if s.PID > 0 {
		return fmt.Sprintf("with pid %d", s.PID)
	}
	return fmt.Sprintf("running %q", s.Exe)
}

func (s *Side) rangeText() string {
	var parts []string
	if b := s.Sel.From; !b.IsZero() {
		parts = append(parts, fmt.Sprintf("from=%s (%s)", b.Given, stamp(s.from)))
	}
	if b := s.Sel.To; !b.IsZero() {
		parts = append(parts, fmt.Sprintf("to=%s (%s)", b.Given, stamp(s.to)))
	}
	return strings.Join(parts, " and ")
}

func listProcesses(ps map[int64]process) string {
	var names []string
	for _, p := range ps {
		names = append(names, p.String())
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func offset(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }

// memo maps span or trace ids to their step's record; the oldest go first, so that it
// stays at its size.
type memo[K comparable] struct {
	m    map[K]*record
	ring []K
	next int
}

func newMemo[K comparable](n int) *memo[K] {
	return &memo[K]{m: make(map[K]*record, n), ring: make([]K, 0, n)}
}

func (m *memo[K]) put(k K, r *record) {
	if _, ok := m.m[k]; !ok {
		if len(m.ring) < cap(m.ring) {
			m.ring = append(m.ring, k)
		} else {
			delete(m.m, m.ring[m.next])
			m.ring[m.next] = k
			m.next = (m.next + 1) % len(m.ring)
			if m.next == 0 {
				// A map that deletes as much as it inserts keeps growing for a while
				// with what it deleted; a new one each round holds the live keys alone.
				m.m = maps.Clone(m.m)
			}
		}
	}
	m.m[k] = r
}

func (m *memo[K]) get(k K) *record { return m.m[k] }
