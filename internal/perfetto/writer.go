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
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
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

	// What the document names that no span does: the worker slices' category and their
	// thread's ith, and the queued copies' flows' category.
	workerCat = "ggml.worker"
	ithArg    = "ggml.thread.ith"
	copyCat   = "ggml.copy"
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
	if v, ok := a.Get(schema.ThreadID); ok && v.Type() == pcommon.ValueTypeInt && v.Int() >= 0 && v.Int() < synthetic {
		tid = v.Int()
	}
	if tid < 0 {
		w.nodes = append(w.nodes, node{sp: sp, p: p, seq: int32(len(w.nodes)), start: start, end: end})
		return
	}
	name := sp.Name()
	if name == schema.SpanDevice {
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
	case schema.SpanCopy:
		// A flow binds to the slice enclosing its ts: a copy's middle, if it has one.
		if q, ok := a.Get(schema.GGMLCopyQueued); ok && q.Bool() && end-start >= 2 && len(p.queued[tid]) < maxQueued {
			p.queued[tid] = append(p.queued[tid], start+(end-start)/2)
		}
	case schema.SpanGraph:
		w.graphs[sp.SpanID()] = int32(len(w.glist))
		w.glist = append(w.glist, graph{p: p, tid: tid, start: start, end: end})
	case schema.SpanDecode:
		tok, ok := a.Get(schema.LlamaBatchTokens)
		if !ok || tok.Type() != pcommon.ValueTypeInt || end <= start {
			return
		}
		phase := "tokens"
		if v, ok := a.Get(schema.LlamaPhase); ok && v.Str() != "" {
			phase = v.Str()
		}
		w.counter(p.pid, "llama tokens/s", end, phase, float64(tok.Int())*1e9/float64(end-start))
	}
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
