package perfetto

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
)

// emitNodes writes the node spans of the batch, graph by graph, in the order they ran.
func (w *Writer) emitNodes() {
	for i := range w.nodes {
		n := &w.nodes[i]
		g, ok := w.graphs[n.sp.ParentSpanID()]
		if !ok {
			g = -1
		}
		n.g = g
	}
	slices.SortFunc(w.nodes, func(a, b node) int {
		if c := cmp.Compare(a.g, b.g); c != 0 {
			return c
		}
		if a.g < 0 { // orphans: by process, so that each track's are together
			if c := cmp.Compare(a.p.pid, b.p.pid); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end), cmp.Compare(a.seq, b.seq))
	})
	ns := w.nodes
	for len(ns) > 0 && ns[0].g < 0 {
		w.orphan(&ns[0])
		ns = ns[1:]
	}
	for i := 0; i < len(ns); {
		j := i + 1
		for j < len(ns) && ns[j].g == ns[i].g {
			j++
		}
		w.graphNodes(&w.glist[ns[i].g], ns[i:j])
		i = j
	}
}

// orphan writes a span with no thread and no graph span in its batch on its process's
// track for those, nested under the slices still open there or clamped into them.
func (w *Writer) orphan(n *node) {
	p := n.p
	s := max(n.start, p.orphanStart)
	for len(p.orphanOpen) > 0 && p.orphanOpen[len(p.orphanOpen)-1] <= s {
		p.orphanOpen = p.orphanOpen[:len(p.orphanOpen)-1]
	}
	e := n.end
	if k := len(p.orphanOpen); k > 0 {
		e = min(e, p.orphanOpen[k-1])
	}
	e = max(e, s)
	if len(p.orphanOpen) < 64 { // deeper ones are clamped to the 64th
		p.orphanOpen = append(p.orphanOpen, e)
	}
	p.orphanStart = s
	w.thread(p, orphanTID)
	w.slice(p.pid, orphanTID, schema.SpanNode, n.sp.Name(), s, e, n.sp, n.start-s+n.end-e)
}

// graphNodes writes the node spans of one graph, sorted by start, on the graph's thread.
// Node spans overlap their neighbours by the moments threads take to leave a barrier,
// and slices on a track must nest or not overlap: each node is clamped into its graph and
// its end to the next node's start. The clamped nanoseconds go in its args.
func (w *Writer) graphNodes(g *graph, ns []node) {
	perf := w.perf[:0]
	var flowTS int64
	flowFrom := false
	last := g.start
	for i := range ns {
		n := &ns[i]
		s := min(max(n.start, g.start), g.end)
		e := min(n.end, g.end)
		if i+1 < len(ns) {
			e = min(e, max(ns[i+1].start, g.start))
		}
		e = max(e, s)
		last = e
		a := n.sp.Attributes()
		w.slice(g.p.pid, g.tid, schema.SpanNode, n.sp.Name(), s, e, n.sp, s-n.start+n.end-e)
		w.workers(g, n, s, e)
		perf = w.nodeCounters(g.p.pid, s, a, perf)
		// A flow binds to the slice enclosing its ts; the middle of a slice of at least
		// 2 ns is inside it and no other on the track.
		if v, ok := a.Get(schema.GGMLCriticalPath); ok && v.Bool() && e-s >= 2 {
			mid := s + (e-s)/2
			if flowFrom {
				w.flows++
				w.flow('s', g.p.pid, g.tid, flowTS, schema.GGMLCriticalPath, "critical path")
				w.flow('f', g.p.pid, g.tid, mid, schema.GGMLCriticalPath, "critical path")
			}
			flowFrom, flowTS = true, mid
		}
	}
	// Counters hold their value until the next one: bring them to 0 after the graph.
	for _, k := range perf {
		w.counter(g.p.pid, k, last, "per node", 0)
	}
	w.perf = perf[:0]
}

// workers writes a slice per worker thread ith > 0 of a node, its busy time from the
// node's start, on a track per worker. Thread ith's busy time ends before the barrier
// that precedes the next node, so the slices of successive nodes do not overlap; they are
// clamped to the node's slice all the same.
func (w *Writer) workers(g *graph, n *node, s, e int64) {
	v, ok := n.sp.Attributes().Get(schema.GGMLThreadBusyNS)
	if !ok || v.Type() != pcommon.ValueTypeSlice || g.tid >= remapBase {
		return
	}
	busy := v.Slice()
	for ith := 1; ith < busy.Len() && ith < maxIth; ith++ {
		b := busy.At(ith)
		if b.Type() != pcommon.ValueTypeInt || min(b.Int(), e-s) <= 0 {
			continue
		}
		tid := workerTID(g.tid, ith)
		w.thread(g.p, tid)
		b2 := w.open()
		b2 = append(b2, `"ph":"X","cat":"`+workerCat+`","name":`...)
		b2 = appendString(b2, n.sp.Name())
		b2 = appendIDs(b2, g.p.pid, tid)
		b2 = appendTimes(b2, s, min(b.Int(), e-s))
		b2 = append(b2, `,"args":{"`+ithArg+`":`...)
		b2 = strconv.AppendInt(b2, int64(ith), 10)
		b2 = append(b2, `,"`+schema.GGMLThreadBusyNS+`":`...)
		b2 = strconv.AppendInt(b2, b.Int(), 10)
		if t, ok := n.sp.Attributes().Get(schema.GGMLTensorName); ok {
			b2 = append(b2, `,"`+schema.GGMLTensorName+`":`...)
			b2 = appendString(b2, t.AsString())
		}
		w.close(append(b2, "}}"...))
	}
}

// device writes a device's work on a split to its own track, beside the thread that
// handed it over: it outlives the calls on that thread. Two splits that one wait ended
// overlap; the later one starts where the earlier ends, and says by how much. The copies
// the thread queued to the device since its last split flow into it.
func (w *Writer) device(p *proc, thread, start, end int64, sp ptrace.Span) {
	tid := deviceTID(thread)
	w.thread(p, tid)
	clamped := int64(0)
	if last, ok := p.deviceEnd[tid]; ok && start < last {
		clamped = min(last, end) - start
		start += clamped
	}
	if len(p.deviceEnd) >= maxThreads {
		clear(p.deviceEnd)
	}
	p.deviceEnd[tid] = end
	w.slice(p.pid, tid, "device", sp.Name(), start, end, sp, clamped)
	if end-start >= 2 {
		for _, ts := range p.queued[thread] {
			w.flows++
			w.flow('s', p.pid, thread, ts, copyCat, "queued copy")
			w.flow('f', p.pid, tid, start+(end-start)/2, copyCat, "queued copy")
		}
	}
	delete(p.queued, thread)
}

// deviceTID is the track of the device work that thread tid hands over: worker 0's,
// which no worker uses (the graph thread is worker 0).
func deviceTID(tid int64) int64 { return workerTID(tid, 0) }

// workerTID is the track of GGML worker ith of the graphs thread tid computes.
func workerTID(tid int64, ith int) int64 { return synthetic | int64(ith)<<22 | tid }

// nodeCounters writes a node's perf counters and IPC, each on a counter track of its
// process, at the node's start; keys lists the counters written in this graph so far.
func (w *Writer) nodeCounters(pid, ts int64, a pcommon.Map, keys []string) []string {
	seen := 0
	a.Range(func(k string, v pcommon.Value) bool {
		if !strings.HasPrefix(k, schema.PerfPrefix) && k != schema.GGMLCountersIPC {
			return true
		}
		var f float64
		switch v.Type() {
		case pcommon.ValueTypeInt:
			f = float64(v.Int())
		case pcommon.ValueTypeDouble:
			f = v.Double()
		default:
			return true
		}
		seen++
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		w.counter(pid, k, ts, "per node", f)
		return true
	})
	if seen == 0 { // a node without counters: none counted, not the last node's
		for _, k := range keys {
			w.counter(pid, k, ts, "per node", 0)
		}
	}
	return keys
}
