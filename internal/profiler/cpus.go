package profiler

import (
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/cpus"
)

// readTopology reads the machine's CPU topology once, at Start; nil where it cannot be,
// and the CPUs targets may run on go unreported.
func readTopology(log *zap.Logger) *cpus.Topology {
	top, err := cpus.Read("/sys")
	if err != nil {
		log.Warn("the CPUs targets may run on are not reported: the CPU topology could not be read", zap.Error(err))
		return nil
	}
	return &top
}

// allowed reads what process pid may run on: its main thread's affinity, one small file,
// at its attach and at each metrics export (taskset or a cpuset may change it while it
// runs). False where it cannot be read: the process is gone, or the topology unknown.
func (p *Profiler) allowed(pid int) (cpus.Count, bool) {
	if p.top == nil {
		return cpus.Count{}, false
	}
	list, err := cpus.Allowed("/proc", pid)
	if err != nil {
		return cpus.Count{}, false
	}
	return p.top.Of(list), true
}

// cpusRead is what one process may run on, as read at a metrics export, and what the
// machine's other processes took of it since the last.
type cpusRead struct {
	pid   int
	c     cpus.Count
	took  cpus.Took
	taken bool // took was read
}

// readAllowed reads what each of pids may run on, and what the others took of it.
func (p *Profiler) readAllowed(pids []int) []cpusRead {
	got := make([]cpusRead, 0, len(pids))
	var ok []int
	var lists [][]int
	for _, pid := range pids {
		if p.top == nil {
			break
		}
		list, err := cpus.Allowed("/proc", pid)
		if err != nil {
			continue
		}
		got = append(got, cpusRead{pid: pid, c: p.top.Of(list)})
		ok, lists = append(ok, pid), append(lists, list)
	}
	if p.others == nil {
		return got
	}
	took, err := p.others.Read(ok, lists)
	if err != nil {
		if !p.othersWarned {
			p.othersWarned = true
			p.log.Warn("what other processes take of the targets' CPUs is not reported: /proc/stat could not be read", zap.Error(err))
		}
		return got
	}
	for _, t := range took {
		for i := range got {
			if got[i].pid == t.PID {
				got[i].took, got[i].taken = t, true
			}
		}
	}
	return got
}
