package profiler

import (
	"errors"
	"io/fs"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/cgroup"
)

// readQuotas reads every tracked process's cgroup CPU quota and throttling for the
// metrics, outside the lock: a few small files a process, at the metrics interval. A
// process whose cgroup cannot be read is warned about once.
func (p *Profiler) readQuotas() {
	if p.cgroups == nil {
		if p.noCgroups {
			return
		}
		r, err := cgroup.NewReader("/proc")
		if err != nil {
			p.noCgroups = true
			p.log.Warn("CPU quotas and throttling are not reported: the cgroup mounts could not be read", zap.Error(err))
			return
		}
		p.cgroups = r
	}
	p.mu.Lock()
	pids := make([]int, 0, len(p.tracked))
	for pid := range p.tracked {
		pids = append(pids, pid)
	}
	p.mu.Unlock()
	type read struct {
		c   cgroup.CPU
		err error
	}
	got := make([]read, len(pids))
	for i, pid := range pids {
		got[i].c, got[i].err = p.cgroups.CPU(pid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, pid := range pids {
		t := p.tracked[pid]
		switch err := got[i].err; {
		case t == nil, errors.Is(err, fs.ErrNotExist):
			// Gone meanwhile.
		case err != nil:
			if !t.quotaWarned {
				t.quotaWarned = true
				p.log.Warn("the CPU quota of a profiled process cannot be read", zap.Int("pid", pid), zap.Error(err))
			}
		default:
			p.acc.Quota(pid, got[i].c)
		}
	}
}
