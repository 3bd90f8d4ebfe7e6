package profiler

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/cgroup"
	"github.com/profinfer/profinfer/internal/cpus"
)

// The metrics goroutine reads what the kernel counts and the targets' cgroups, then has
// the reader build the metrics out of what it assembled.

// quotas reads targets' CPU quotas, made at the first metrics export; none says it could
// not be.
type quotas struct {
	reader *cgroup.Reader
	none   bool
}

// quotaRead is one process's CPU quota as read.
type quotaRead struct {
	pid int
	c   cgroup.CPU
	err error
}

// read reads the cgroup CPU quota and throttling of each process: a few small files a
// process, at the metrics interval.
func (q *quotas) read(pids []int, log *zap.Logger) []quotaRead {
	if q.reader == nil {
		if q.none {
			return nil
		}
		r, err := cgroup.NewReader("/proc")
		if err != nil {
			q.none = true
			log.Warn("CPU quotas and throttling are not reported: the cgroup mounts could not be read", zap.Error(err))
			return nil
		}
		q.reader = r
	}
	got := make([]quotaRead, len(pids))
	for i, pid := range pids {
		got[i].pid = pid
		got[i].c, got[i].err = q.reader.CPU(pid)
	}
	return got
}

// emitMetrics hands the pipeline the metrics of now, on the metrics goroutine.
func (p *Profiler) emitMetrics(ctx context.Context) {
	if p.metrics == nil {
		return
	}
	var pids []int
	if !p.ask(func(in *ingest) { pids = in.pids() }) {
		return
	}
	drops, quotas, allowed, idle := p.drops(), p.quota.read(pids, p.log), p.readAllowed(pids), p.readIdle()
	var md pmetric.Metrics
	if p.ask(func(in *ingest) { md = p.buildMetrics(in, drops, quotas, allowed, idle) }) {
		p.consume(ctx, md)
	}
}

// emit hands the pipeline the last metrics, at Shutdown: the loops are gone.
func (p *Profiler) emit(ctx context.Context, in *ingest) {
	if p.metrics != nil {
		pids := in.pids()
		p.consume(ctx, p.buildMetrics(in, p.drops(), p.quota.read(pids, p.log), p.readAllowed(pids), p.readIdle()))
	}
}

func (p *Profiler) consume(ctx context.Context, md pmetric.Metrics) {
	if err := p.metrics.ConsumeMetrics(ctx, md); err != nil {
		p.log.Warn("metrics not accepted by the pipeline", zap.Error(err))
	}
}

// buildMetrics builds the metrics on the reader. A process whose cgroup cannot be read is
// warned about once.
func (p *Profiler) buildMetrics(in *ingest, drops uint64, quotas []quotaRead, allowed []cpusRead, idle cpus.Idle) pmetric.Metrics {
	ran := map[int]uint64{}
	for _, a := range allowed {
		if t := in.procs[a.pid]; t != nil {
			t.cpus, t.allowed = a.c, a.list
		}
		ran[a.pid] = a.ran
	}
	for pid, t := range in.procs {
		in.noteIdle(t, idle, ran[pid])
	}
	for pid, t := range in.procs {
		in.acc.CPUs(pid, t.cpus)
	}
	for _, q := range quotas {
		t := in.procs[q.pid]
		switch {
		case t == nil, errors.Is(q.err, fs.ErrNotExist):
			// Gone meanwhile.
		case q.err != nil:
			if !t.quotaWarned {
				t.quotaWarned = true
				p.log.Warn("the CPU quota of a profiled process cannot be read", zap.Int("pid", q.pid), zap.Error(q.err))
			}
		default:
			in.acc.Quota(q.pid, q.c)
		}
	}
	shown := p.shown.Load()
	in.tele.EventsDropped = drops
	in.tele.GraphsDropped = in.asm.Stats.DroppedGraphs
	in.tele.GraphsTraced = in.traced
	in.tele.AttachFailures = p.reg.Failures()
	if shown != nil {
		in.tele.ProbesAttached = shown.probes
		if p.cfg.sampled() {
			for pid := range in.procs {
				// Zero (a window open, or none scheduled yet) is long past: Window reads it as 0.
				in.acc.Window(pid, time.Until(shown.next[pid]))
			}
		}
	}
	return in.acc.Emit(in.tele)
}

// pids are the traced processes.
func (in *ingest) pids() []int {
	pids := make([]int, 0, len(in.procs))
	for pid := range in.procs {
		pids = append(pids, pid)
	}
	return pids
}
