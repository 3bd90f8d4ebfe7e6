package perfetto

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

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
