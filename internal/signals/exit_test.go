package signals

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/cgroup"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/watch"
)

// A process's end is its process span's event, with the cause as the kernel gave it:
// the cgroup OOM killer's kill with the cgroup's limit and use; a plain exit's status.
func TestExitSpan(t *testing.T) {
	s := NewSpans(Clock{Offset: 1000}, true, roofline.Peaks{}, nil)
	for _, c := range []struct {
		end   End
		cause string
		attrs map[string]any
	}{
		{End{Exit: watch.Exit{At: 90, Status: 9, OOM: true}, Traced: 10, OOM: OOMCgroup, Graphs: 3,
			Memory: cgroup.Limit{Cgroup: "/job", Limit: 600e6, Usage: 12e5, Peak: 600e6}},
			"killed by SIGKILL: the OOM killer, for memory cgroup /job's limit (600.0 MB; usage 1.2 MB, peak 600.0 MB)",
			map[string]any{schema.ProfinferExitSignal: "SIGKILL", schema.ProfinferExitOOMKiller: "cgroup", schema.ProfinferExitCgroup: "/job",
				schema.ProfinferExitMemoryLimit: int64(600e6), schema.ProfinferExitMemoryUsage: int64(12e5),
				schema.ProfinferExitMemoryPeak: int64(600e6), schema.ProfinferExitGraphs: int64(3), schema.ProfinferExitSteps: int64(0)}},
		{End{Exit: watch.Exit{At: 90, Status: 9, OOM: true}, Traced: 10, OOM: OOMSystem},
			"killed by SIGKILL: the OOM killer, the system being out of memory",
			map[string]any{schema.ProfinferExitOOMKiller: "system", schema.ProfinferExitCgroup: nil, schema.ProfinferExitMemoryLimit: nil}},
		{End{Exit: watch.Exit{At: 90, Status: 3 << 8}, Traced: 10, Steps: 2}, "exited with status 3",
			map[string]any{schema.ProcessExitCode: int64(3), schema.ProfinferExitSteps: int64(2)}},
		{End{Exit: watch.Exit{At: 90, Status: 0x80 | 6}, Traced: 10}, "killed by SIGABRT (core dumped)",
			map[string]any{schema.ProfinferExitSignal: "SIGABRT", schema.ProfinferExitCoreDumped: true}},
	} {
		td := ptrace.NewTraces()
		s.Exit(td, &Origin{PID: 1, Exe: "/bin/llama-bench"}, &c.end)
		sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		if sp.Name() != schema.SpanProcess || sp.StartTimestamp() != 1010 || sp.EndTimestamp() != 1090 || sp.Events().Len() != 1 {
			t.Fatalf("span %s %d..%d, %d events", sp.Name(), sp.StartTimestamp(), sp.EndTimestamp(), sp.Events().Len())
		}
		if failed := sp.Status().Code() == ptrace.StatusCodeError; failed != (c.end.Status != 0) || failed && sp.Status().Message() != c.cause {
			t.Errorf("status %v %q", sp.Status().Code(), sp.Status().Message())
		}
		ev := sp.Events().At(0)
		a := ev.Attributes()
		if ev.Name() != schema.EventProcessExit || ev.Timestamp() != 1090 || schema.Str(a, schema.ProfinferExitCause) != c.cause {
			t.Errorf("event %s at %d: %v", ev.Name(), ev.Timestamp(), a.AsRaw())
		}
		for k, v := range c.attrs {
			if got := a.AsRaw()[k]; got != v {
				t.Errorf("%s: %v, want %v (%v)", k, got, v, a.AsRaw())
			}
		}
	}
}
