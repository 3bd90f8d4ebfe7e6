package signals

import (
	"fmt"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/cgroup"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/watch"
)

// End is how a traced process ended, as the kernel gave it.
type End struct {
	watch.Exit
	Traced uint64 // when profinfer attached, CLOCK_MONOTONIC ns
	// OOM is where the kernel's OOM killer chose it: OOMCgroup, with Memory the cgroup
	// whose limit it met, OOMSystem, or OOMUnknown; "" where it did not.
	OOM    string
	Memory cgroup.Limit
	// Graphs and Steps are what it computed while traced: CPU graphs, finished or cut,
	// and steps finished.
	Graphs, Steps uint64
}

// Values of schema.ProfinferExitOOMKiller.
const (
	OOMCgroup  = "cgroup"
	OOMSystem  = "system"
	OOMUnknown = "unknown" // its memory cgroups could not be read
)

// Cause says how the process ended, in words: "exited with status 1", "killed by
// SIGKILL: the OOM killer, for memory cgroup /job's limit (600 MB; usage 1.2 MB, peak
// 600 MB)".
func (e *End) Cause() string {
	sig := e.Signal()
	if sig == 0 {
		return "exited with status " + strconv.Itoa(e.Code())
	}
	s := "killed by " + unix.SignalName(unix.Signal(sig))
	if s == "killed by " {
		s += "signal " + strconv.Itoa(sig)
	}
	if e.Core() {
		s += " (core dumped)"
	}
	switch e.OOM {
	case OOMCgroup:
		m := e.Memory
		s += fmt.Sprintf(": the OOM killer, for memory cgroup %s's limit (%s; usage %s", m.Cgroup, mb(m.Limit), mb(m.Usage))
		if m.Peak > 0 {
			s += ", peak " + mb(m.Peak)
		}
		s += ")"
	case OOMSystem:
		s += ": the OOM killer, the system being out of memory"
	case OOMUnknown:
		s += ": the OOM killer"
	}
	return s
}

// mb writes bytes in MB (10^6).
func mb(b uint64) string { return strconv.FormatFloat(float64(b)/1e6, 'f', 1, 64) + " MB" }

// Exit appends p's process span, from its attach to its end, with its exit event.
func (s *Spans) Exit(td ptrace.Traces, p *Origin, e *End) {
	sp := s.scope(td, p).AppendEmpty()
	s.begin(sp, s.traceID(), pcommon.NewSpanIDEmpty(), schema.SpanProcess, e.Traced, e.At)
	cause := e.Cause()
	if e.Status != 0 {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(cause)
	}
	ev := sp.Events().AppendEmpty()
	ev.SetName(schema.EventProcessExit)
	ev.SetTimestamp(s.Clock.Time(e.At))
	a := ev.Attributes()
	if sig := e.Signal(); sig == 0 {
		a.PutInt(schema.ProcessExitCode, int64(e.Code()))
	} else {
		a.PutStr(schema.ProfinferExitSignal, unix.SignalName(unix.Signal(sig)))
		a.PutBool(schema.ProfinferExitCoreDumped, e.Core())
	}
	if e.OOM != "" {
		a.PutStr(schema.ProfinferExitOOMKiller, e.OOM)
	}
	if e.OOM == OOMCgroup {
		a.PutStr(schema.ProfinferExitCgroup, e.Memory.Cgroup)
		a.PutInt(schema.ProfinferExitMemoryLimit, int64(e.Memory.Limit))
		a.PutInt(schema.ProfinferExitMemoryUsage, int64(e.Memory.Usage))
		if e.Memory.Peak > 0 {
			a.PutInt(schema.ProfinferExitMemoryPeak, int64(e.Memory.Peak))
		}
	}
	a.PutStr(schema.ProfinferExitCause, cause)
	a.PutInt(schema.ProfinferExitGraphs, int64(e.Graphs))
	a.PutInt(schema.ProfinferExitSteps, int64(e.Steps))
}
