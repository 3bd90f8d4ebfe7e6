// Package perfetto converts profinfer's OTLP traces and metrics into a trace in the Chrome
// Trace Event Format (JSON object form), which Perfetto's UI and chrome://tracing load.
//
// Each OTLP resource is a process track, each thread.id a thread track. Node spans go on
// their graph's thread, with a slice per GGML worker thread on a track of its own; the
// critical path is drawn as flow arrows; tokens per second and per-node perf counters
// are counter tracks.
//
// Timestamps are microseconds with three decimals (exact nanoseconds) since an origin,
// the whole second a minute before the first timestamp seen, given in otherData
// (ts_origin_unix_ns). Not since 1970: viewers parse "ts" into a float64, which there
// keeps only a quarter of a microsecond, too coarse for node spans of a few.
package perfetto

import (
	"cmp"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const (
	// Synthetic ids: Linux pids and tids stay below 1<<22 (PID_MAX_LIMIT), so ids from
	// 1<<22 on cannot clash with real ones, and all fit the 32 bits viewers keep.
	remapBase = 1 << 22 // pids given to a second process with the same pid, or none
	synthetic = 1 << 30 // tids of tracks no OS thread has: orphanTID, workerTID
	orphanTID = synthetic
	maxIth    = 256 // worker tracks per graph thread; workerTID packs ith in 8 bits
	maxQueued = 64  // queued copies a thread's next device slice draws flows from

	maxProcs   = 1 << 14 // processes remembered across batches
	maxThreads = 1 << 12 // named tracks remembered per process
	flushAt    = 64 << 10
)

// Writer streams a Chrome Trace Event Format document to w.
type Writer struct {
	out    io.Writer
	buf    []byte
	events int
	err    error
	closed bool

	origin     int64 // Unix ns of ts 0
	haveOrigin bool
	flows      uint64 // flow ids handed out

	procs   map[string]*proc // by identity: pid, host.name, service.instance.id
	pidUsed map[int64]bool   // real pids already given to a process in the document
	remaps  int64
	key     []byte

	// Per batch: spans without a thread (node spans) wait until every graph span of the
	// batch is known.
	graphs map[pcommon.SpanID]int32
	glist  []graph
	nodes  []node
	perf   []string
}

type proc struct {
	pid     int64 // in the document
	name    string
	threads map[int64]bool // tracks whose thread_name was written
	// Spans with no thread are nested on one track per process as they come, whatever
	// batch they are in: the start of the last one and the ends of those open around it.
	orphanStart int64
	orphanOpen  []int64
	// The end of the last device slice on each device track, and the middles of the
	// copies each thread queued to a device since: they flow into its next slice.
	deviceEnd map[int64]int64
	queued    map[int64][]int64
}

type graph struct {
	p          *proc
	tid        int64
	start, end int64
}

type node struct {
	sp         ptrace.Span
	p          *proc
	g          int32 // index in glist, or -1: no graph span in this batch
	seq        int32
	start, end int64
}

// NewWriter returns a Writer that streams a document to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{
		out:     w,
		buf:     append(make([]byte, 0, 2*flushAt), `{"displayTimeUnit":"ns","traceEvents":[`...),
		procs:   map[string]*proc{},
		pidUsed: map[int64]bool{},
		graphs:  map[pcommon.SpanID]int32{},
	}
}

var errClosed = errors.New("perfetto: Writer used after Close")

// Traces appends slices for every span of td, and the counters and flows they carry.
func (w *Writer) Traces(td ptrace.Traces) error {
	if w.closed {
		return errClosed
	}
	clear(w.graphs)
	w.glist, w.nodes = w.glist[:0], w.nodes[:0]
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		p := w.process(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				w.span(p, spans.At(k))
			}
		}
	}
	w.emitNodes()
	clear(w.nodes) // drop the references to td
	w.nodes = w.nodes[:0]
	w.flush()
	return w.err
}

// span writes a span that runs on a thread, or keeps a node span for emitNodes.
func (w *Writer) span(p *proc, sp ptrace.Span) {
	start, end := w.rel(sp.StartTimestamp()), w.rel(sp.EndTimestamp())
	end = max(end, start)
	a := sp.Attributes()
	tid := int64(-1)
	if v, ok := a.Get("thread.id"); ok && v.Type() == pcommon.ValueTypeInt && v.Int() >= 0 && v.Int() < synthetic {
		tid = v.Int()
	}
	if tid < 0 {
		w.nodes = append(w.nodes, node{sp: sp, p: p, seq: int32(len(w.nodes)), start: start, end: end})
		return
	}
	name := sp.Name()
	if name == "ggml.device.compute" {
		w.device(p, tid, start, end, sp)
		return
	}
	w.thread(p, tid)
	// The category is the layer the span's name begins with: ggml, llama, whisper, ollama.
	cat := name
	if i := strings.IndexAny(name, "._"); i > 0 {
		cat = name[:i]
	}
	w.slice(p.pid, tid, cat, name, start, end, sp, 0)
	switch name {
	case "ggml.backend.tensor_copy":
		// A flow binds to the slice enclosing its ts: a copy's middle, if it has one.
		if q, ok := a.Get("ggml.copy.queued"); ok && q.Bool() && end-start >= 2 && len(p.queued[tid]) < maxQueued {
			p.queued[tid] = append(p.queued[tid], start+(end-start)/2)
		}
	case "ggml.graph_compute":
		w.graphs[sp.SpanID()] = int32(len(w.glist))
		w.glist = append(w.glist, graph{p: p, tid: tid, start: start, end: end})
	case "llama_decode":
		tok, ok := a.Get("llama.batch.tokens")
		if !ok || tok.Type() != pcommon.ValueTypeInt || end <= start {
			return
		}
		phase := "tokens"
		if v, ok := a.Get("llama.phase"); ok && v.Str() != "" {
			phase = v.Str()
		}
		w.counter(p.pid, "llama tokens/s", end, phase, float64(tok.Int())*1e9/float64(end-start))
	}
}

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
	w.slice(p.pid, orphanTID, "ggml.node", n.sp.Name(), s, e, n.sp, n.start-s+n.end-e)
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
		w.slice(g.p.pid, g.tid, "ggml.node", n.sp.Name(), s, e, n.sp, s-n.start+n.end-e)
		w.workers(g, n, s, e)
		perf = w.nodeCounters(g.p.pid, s, a, perf)
		// A flow binds to the slice enclosing its ts; the middle of a slice of at least
		// 2 ns is inside it and no other on the track.
		if v, ok := a.Get("ggml.critical_path"); ok && v.Bool() && e-s >= 2 {
			mid := s + (e-s)/2
			if flowFrom {
				w.flows++
				w.flow('s', g.p.pid, g.tid, flowTS, "ggml.critical_path", "critical path")
				w.flow('f', g.p.pid, g.tid, mid, "ggml.critical_path", "critical path")
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
	v, ok := n.sp.Attributes().Get("ggml.thread.busy_ns")
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
		b2 = append(b2, `"ph":"X","cat":"ggml.worker","name":`...)
		b2 = appendString(b2, n.sp.Name())
		b2 = appendIDs(b2, g.p.pid, tid)
		b2 = appendTimes(b2, s, min(b.Int(), e-s))
		b2 = append(b2, `,"args":{"ggml.thread.ith":`...)
		b2 = strconv.AppendInt(b2, int64(ith), 10)
		b2 = append(b2, `,"ggml.thread.busy_ns":`...)
		b2 = strconv.AppendInt(b2, b.Int(), 10)
		if t, ok := n.sp.Attributes().Get("ggml.tensor.name"); ok {
			b2 = append(b2, `,"ggml.tensor.name":`...)
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
			w.flow('s', p.pid, thread, ts, "ggml.copy", "queued copy")
			w.flow('f', p.pid, tid, start+(end-start)/2, "ggml.copy", "queued copy")
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
		if !strings.HasPrefix(k, "perf.") && k != "ggml.counters.ipc" {
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

// slice writes an X event for sp, with its attributes as args.
func (w *Writer) slice(pid, tid int64, cat, name string, start, end int64, sp ptrace.Span, clamped int64) {
	b := w.open()
	b = append(b, `"ph":"X","cat":"`...)
	b = append(b, cat...)
	b = append(b, `","name":`...)
	b = appendString(b, name)
	b = appendIDs(b, pid, tid)
	b = appendTimes(b, start, end-start)
	b = append(b, `,"args":{`...)
	b, more := appendMap(b, sp.Attributes(), false)
	if st := sp.Status(); st.Code() == ptrace.StatusCodeError {
		if more {
			b = append(b, ',')
		}
		more = true
		b = append(b, `"otel.status_code":"ERROR","otel.status_description":`...)
		b = appendString(b, st.Message())
	}
	if clamped > 0 {
		if more {
			b = append(b, ',')
		}
		b = append(b, `"perfetto.clamped_ns":`...)
		b = strconv.AppendInt(b, clamped, 10)
	}
	w.close(append(b, "}}"...))
}

// counter writes a C event; viewers name its track after name and key.
func (w *Writer) counter(pid int64, name string, ts int64, key string, v float64) {
	b := w.open()
	b = append(b, `"ph":"C","name":`...)
	b = appendString(b, name)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, pid, 10)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, ts)
	b = append(b, `,"args":{`...)
	b = appendString(b, key)
	b = append(b, ':')
	b = appendFloat(b, v)
	w.close(append(b, "}}"...))
}

// flow writes the start or end of flow w.flows, of category cat and name, bound to the
// slice enclosing ts.
func (w *Writer) flow(ph byte, pid, tid, ts int64, cat, name string) {
	b := w.open()
	b = append(b, `"ph":"`...)
	b = append(b, ph)
	b = append(b, `","cat":"`...)
	b = append(b, cat...)
	b = append(b, `","name":"`...)
	b = append(b, name...)
	b = append(b, `","id":`...)
	b = strconv.AppendUint(b, w.flows, 10)
	b = appendIDs(b, pid, tid)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, ts)
	w.close(append(b, `,"bp":"e"}`...))
}

// thread names track tid of p once.
func (w *Writer) thread(p *proc, tid int64) {
	if p.threads[tid] {
		return
	}
	if len(p.threads) >= maxThreads {
		clear(p.threads) // naming a track again does no harm
	}
	p.threads[tid] = true
	var name string
	switch {
	case tid == orphanTID:
		name = "spans without a thread"
	case tid > synthetic && tid>>22&(maxIth-1) == 0:
		name = "device work queued by thread " + strconv.FormatInt(tid&(remapBase-1), 10)
	case tid > synthetic:
		name = "ggml worker ith " + strconv.FormatInt(tid>>22&(maxIth-1), 10) +
			" (graph thread " + strconv.FormatInt(tid&(remapBase-1), 10) + ")"
	default:
		name = "thread " + strconv.FormatInt(tid, 10)
	}
	b := w.open()
	b = append(b, `"ph":"M","name":"thread_name"`...)
	b = appendIDs(b, p.pid, tid)
	b = append(b, `,"args":{"name":`...)
	b = appendString(b, name)
	w.close(append(b, "}}"...))
}

// process returns the process of resource r, naming its track when it is new or its
// name changed (a model loaded). Resources with the same pid but another host or
// service instance are other processes: the second one seen gets a pid of its own.
func (w *Writer) process(r pcommon.Resource) *proc {
	a := r.Attributes()
	pid, hasPID := int64(0), false
	if v, ok := a.Get("process.pid"); ok && v.Type() == pcommon.ValueTypeInt {
		pid, hasPID = v.Int(), true
	}
	str := func(k string) string {
		if v, ok := a.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	host, inst := str("host.name"), str("service.instance.id")
	k := w.key[:0]
	if hasPID {
		k = strconv.AppendInt(k, pid, 10)
	} else {
		k = append(k, str("service.name")...)
	}
	k = append(append(append(append(k, 0), host...), 0), inst...)
	w.key = k
	p := w.procs[string(k)]
	if p == nil {
		if len(w.procs) >= maxProcs {
			// Forget one. Its pid stays taken, so a process seen again later gets a new
			// track rather than another's.
			for id := range w.procs {
				delete(w.procs, id)
				break
			}
		}
		p = &proc{threads: map[int64]bool{}, orphanStart: -1 << 62, deviceEnd: map[int64]int64{}, queued: map[int64][]int64{}}
		if hasPID && pid >= 0 && pid < remapBase && !w.pidUsed[pid] && len(w.pidUsed) < 4*maxProcs {
			p.pid = pid
			w.pidUsed[pid] = true
		} else {
			w.remaps++
			p.pid = remapBase + w.remaps
		}
		w.procs[string(k)] = p
	}
	svc := str("service.name")
	if svc == "" {
		svc = str("process.executable.name")
	}
	if svc == "" {
		svc = "process"
	}
	name := svc
	if hasPID {
		name += " pid " + strconv.FormatInt(pid, 10)
	}
	if r := str("ggml.runtime"); r != "" {
		name += " [" + r + "]"
	}
	if m := cmp.Or(str("llama.model.name"), str("whisper.model.type")); m != "" {
		name += " (" + m + ")"
	}
	if host != "" {
		name += " on " + host
	}
	if inst != "" {
		name += " [" + inst + "]"
	}
	if name != p.name {
		p.name = name
		b := w.open()
		b = append(b, `"ph":"M","name":"process_name","pid":`...)
		b = strconv.AppendInt(b, p.pid, 10)
		b = append(b, `,"args":{"name":`...)
		b = appendString(b, name)
		w.close(append(b, "}}"...))
	}
	return p
}

// charted are the metrics drawn as counters: cumulative sums and gauges that say how
// much was decoded and whether profinfer kept up. Per-op series would be too many tracks.
var charted = map[string]bool{
	"llama.decode.tokens":       true,
	"profinfer.events.received": true,
	"profinfer.events.dropped":  true,
	"profinfer.graphs.dropped":  true,
	"profinfer.graphs.traced":   true,
	"profinfer.spans.dropped":   true,
	"profinfer.probes.attached": true,
}

// Metrics appends a counter event per data point of the charted metrics in md, on its
// resource's process, a series per attribute set. Other metrics are skipped.
func (w *Writer) Metrics(md pmetric.Metrics) error {
	if w.closed {
		return errClosed
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		var p *proc
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if !charted[m.Name()] {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
					continue
				}
				if p == nil {
					p = w.process(rm.Resource())
				}
				for d := 0; d < dps.Len(); d++ {
					dp := dps.At(d)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					var series []string
					dp.Attributes().Range(func(_ string, a pcommon.Value) bool {
						series = append(series, a.AsString())
						return true
					})
					key := strings.Join(series, " ")
					if key == "" {
						key = "value"
					}
					w.counter(p.pid, m.Name(), w.rel(dp.Timestamp()), key, v)
				}
			}
		}
	}
	w.flush()
	return w.err
}

// Close ends the document, with the time origin in otherData, and flushes it.
func (w *Writer) Close() error {
	if w.closed {
		return errors.New("perfetto: Writer closed twice")
	}
	w.closed = true
	w.buf = append(w.buf, "\n],\"otherData\":{\"generator\":\"profinfer\""...)
	if w.haveOrigin {
		w.buf = append(w.buf, `,"ts_origin_unix_ns":"`...)
		w.buf = strconv.AppendInt(w.buf, w.origin, 10)
		w.buf = append(w.buf, `","ts_origin":"`...)
		w.buf = time.Unix(0, w.origin).UTC().AppendFormat(w.buf, time.RFC3339Nano)
		w.buf = append(w.buf, '"')
	}
	w.buf = append(w.buf, "}}\n"...)
	w.flush()
	return w.err
}

// rel converts a timestamp to ns since the origin, which the first one sets.
func (w *Writer) rel(t pcommon.Timestamp) int64 {
	if !w.haveOrigin {
		const s = int64(time.Second)
		w.origin = int64(t) - int64(t)%s - 60*s // room for spans that started earlier
		w.haveOrigin = true
	}
	return int64(t) - w.origin
}

// open starts an event in the buffer and returns it; close takes it back.
func (w *Writer) open() []byte {
	b := w.buf
	if w.events > 0 {
		b = append(b, ',')
	}
	w.events++
	return append(b, '\n', '{')
}

func (w *Writer) close(b []byte) {
	w.buf = b
	if len(b) >= flushAt {
		w.flush()
	}
}

func (w *Writer) flush() {
	if len(w.buf) == 0 {
		return
	}
	if w.err == nil {
		_, w.err = w.out.Write(w.buf)
	}
	w.buf = w.buf[:0]
}

func appendIDs(b []byte, pid, tid int64) []byte {
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, pid, 10)
	b = append(b, `,"tid":`...)
	return strconv.AppendInt(b, tid, 10)
}

func appendTimes(b []byte, ts, dur int64) []byte {
	b = append(b, `,"ts":`...)
	b = appendMicros(b, ts)
	b = append(b, `,"dur":`...)
	return appendMicros(b, dur)
}
