package profiler

import (
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/cgroup"
	"github.com/profinfer/profinfer/internal/signals"
	"github.com/profinfer/profinfer/internal/watch"
)

// ends tells how traced processes end, on the registry's goroutine, which traces and
// retires them: each one's memory cgroups are read at attach, as /proc/PID is gone at
// its end, and read again then, to tell the OOM killer of a cgroup from the system's.
type ends struct {
	reader *cgroup.Reader
	none   bool // the cgroup mounts could not be read
	memory map[int]*cgroup.Memory
}

// watch reads the memory cgroups of process pid, just traced.
func (e *ends) watch(pid int, log *zap.Logger) {
	if e.reader == nil {
		if e.none {
			return
		}
		r, err := cgroup.NewReader("/proc")
		if err != nil {
			e.none = true
			log.Warn("an OOM kill will not be told by its memory cgroup: the cgroup mounts could not be read", zap.Error(err))
			return
		}
		e.reader, e.memory = r, map[int]*cgroup.Memory{}
	}
	m, err := e.reader.WatchMemory(pid)
	if err != nil {
		log.Debug("memory cgroup not read", zap.Int("pid", pid), zap.Error(err))
		return
	}
	e.memory[pid] = m
}

// end is how process pid ended, where the kernel said (exit); nil where it did not.
func (e *ends) end(pid int, exit *watch.Exit, log *zap.Logger) *signals.End {
	m := e.memory[pid]
	delete(e.memory, pid)
	if exit == nil {
		return nil
	}
	end := &signals.End{Exit: *exit}
	if !exit.OOM {
		return end
	}
	end.OOM = signals.OOMUnknown
	if m == nil {
		return end
	}
	l, hit, err := m.Hit()
	switch {
	case err != nil:
		log.Debug("memory cgroup not read at exit", zap.Int("pid", pid), zap.Error(err))
	case hit:
		end.OOM, end.Memory = signals.OOMCgroup, l
	default:
		end.OOM = signals.OOMSystem
	}
	return end
}

// exited records how process t ended: its process span, and a line in the log.
func (in *ingest) exited(t *inProc, end *signals.End) {
	end.Traced, end.Graphs, end.Steps = t.traced, t.graphs, t.steps
	if in.traces {
		in.spans.Exit(in.pending, &t.proc, end)
		sink{in}.pend()
	}
	in.log.Info("traced process ended", zap.Int("pid", t.proc.PID), zap.String("exe", t.proc.Exe),
		zap.String("cause", end.Cause()), zap.Uint64("graphs", end.Graphs), zap.Uint64("steps", end.Steps))
}
