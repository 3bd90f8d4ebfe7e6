package profiler

import (
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/cpus"
	"github.com/profinfer/profinfer/internal/events"
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
// runs), counted and listed. False where it cannot be read: the process is gone, or the
// topology unknown.
func (p *Profiler) allowed(pid int) (cpus.Count, []int, bool) {
	if p.top == nil {
		return cpus.Count{}, nil, false
	}
	list, err := cpus.Allowed("/proc", pid)
	if err != nil {
		return cpus.Count{}, nil, false
	}
	return p.top.Of(list), list, true
}

// cpusRead is what one process may run on, as read at a metrics export, and its CPU
// time then (ns; 0 where it could not be read).
type cpusRead struct {
	pid  int
	c    cpus.Count
	list []int
	ran  uint64
}

// readAllowed reads what each of pids may run on, and its CPU time.
func (p *Profiler) readAllowed(pids []int) []cpusRead {
	got := make([]cpusRead, 0, len(pids))
	for _, pid := range pids {
		if c, list, ok := p.allowed(pid); ok {
			got = append(got, cpusRead{pid, c, list, p.ran(pid)})
		}
	}
	return got
}

// readIdle reads the CPUs' idle time; nil where it cannot be read, which is warned about
// once.
func (p *Profiler) readIdle() cpus.Idle {
	idle, err := cpus.ReadIdle(p.procFS)
	if err != nil {
		if !p.idleWarned.Swap(true) {
			p.log.Warn("how idle the targets' CPUs sat is not reported: /proc/stat could not be read", zap.Error(err))
		}
		return nil
	}
	return idle
}

// noteIdle counts what t's CPUs sat idle since its last reading, and what it took of
// them (ran, its CPU time now as /proc says it), where it computed a graph meanwhile (a
// server's idle spells are no evidence of its neighbours), and makes now its last
// reading. Where /proc no longer has it (it ended), its CPU time is as its last graph
// summed it: short by what it computed after that graph.
func (in *ingest) noteIdle(t *inProc, now cpus.Idle, ran uint64) {
	if now == nil {
		return
	}
	ran = max(ran, t.ran)
	if t.idleAt != nil && t.graphs != t.graphsAtIdle {
		idle, all := now.Since(t.idleAt, t.allowed)
		own := -1.0 // not known: its attach's reading failed, and no graph summed it
		if ran > 0 && t.ranAtIdle > 0 {
			own = float64(ran-min(t.ranAtIdle, ran)) / 1e9
		}
		in.acc.Idle(t.proc.PID, idle, all, own)
	}
	t.idleAt, t.graphsAtIdle = now, t.graphs
	if ran > 0 {
		t.ranAtIdle = ran
	}
}

// summed notes the process's CPU time that a graph's probe summed over its threads.
func (t *inProc) summed(c events.ThreadsCPU) {
	if c.Threads > 0 && !c.Partial {
		t.ran = max(t.ran, c.Run)
	}
}

// ran reads process pid's CPU time from /proc (ns); 0 where it cannot be read.
func (p *Profiler) ran(pid int) uint64 {
	proc, err := p.procFS.Proc(pid)
	if err != nil {
		return 0
	}
	st, err := proc.Stat()
	if err != nil {
		return 0
	}
	return uint64(st.CPUTime() * 1e9)
}
