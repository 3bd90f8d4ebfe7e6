package perfetto

import (
	"cmp"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/profinfer/profinfer/internal/schema"
)

// process returns the process of resource r, naming its track when it is new or its
// name changed (a model loaded). Resources with the same pid but another host or
// service instance are other processes: the second one seen gets a pid of its own.
func (w *Writer) process(r pcommon.Resource) *proc {
	a := r.Attributes()
	pid, hasPID := int64(0), false
	if v, ok := a.Get(schema.ResourceProcessPID); ok && v.Type() == pcommon.ValueTypeInt {
		pid, hasPID = v.Int(), true
	}
	str := func(k string) string {
		if v, ok := a.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	host, inst := str(schema.ResourceHostName), str(schema.ResourceServiceInstanceID)
	k := w.key[:0]
	if hasPID {
		k = strconv.AppendInt(k, pid, 10)
	} else {
		k = append(k, str(schema.ResourceServiceName)...)
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
	svc := str(schema.ResourceServiceName)
	if svc == "" {
		svc = str(schema.ResourceProcessExecutableName)
	}
	if svc == "" {
		svc = "process"
	}
	name := svc
	if hasPID {
		name += " pid " + strconv.FormatInt(pid, 10)
	}
	if r := str(schema.ResourceGGMLRuntime); r != "" {
		name += " [" + r + "]"
	}
	if m := cmp.Or(str(schema.ResourceLlamaModelName), str(schema.ResourceWhisperModelType)); m != "" {
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
