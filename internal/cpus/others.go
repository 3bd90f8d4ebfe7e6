package cpus

import (
	"github.com/prometheus/procfs"
)

// Others counts what the machine's other processes take of the CPUs a process may run
// on: /proc/stat's busy time of each of them, less the process's own and the
// collector's, between two reads (each metrics export). A neighbour on the other cores
// is the evidence a rule needs before it advises using them. It is not safe for
// concurrent use.
type Others struct {
	fs    procfs.FS
	cpus  map[int64]cpuTime // each CPU's time at the last read
	self  float64           // the collector's CPU seconds then
	procs map[int]float64   // each process's CPU seconds then
}

// cpuTime is a CPU's seconds busy and in all.
type cpuTime struct{ busy, all float64 }

// NewOthers returns a counter that reads under proc (/proc).
func NewOthers(proc string) (*Others, error) {
	fs, err := procfs.NewFS(proc)
	if err != nil {
		return nil, err
	}
	return &Others{fs: fs, procs: map[int]float64{}}, nil
}

// Took is what the machine's other processes took of the CPUs one process may run on,
// between two reads: their CPU seconds there, and those CPUs' seconds.
type Took struct {
	PID           int
	Others, Total float64
}

// Read reads the CPUs' and the processes' time, and returns for each of pids (allowed[i]
// the CPUs pids[i] may run on) that was read the last time too what the others took
// since. The process's own time and the collector's are taken off, as if they ran on those
// CPUs.
func (o *Others) Read(pids []int, allowed [][]int) ([]Took, error) {
	st, err := o.fs.Stat()
	if err != nil {
		return nil, err
	}
	now := make(map[int64]cpuTime, len(st.CPU))
	for n, c := range st.CPU {
		busy := c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
		now[n] = cpuTime{busy: busy, all: busy + c.Idle + c.Iowait}
	}
	self := o.cpuSeconds(-1)
	procs := make(map[int]float64, len(pids))
	var out []Took
	for i, pid := range pids {
		own := o.cpuSeconds(pid)
		if own < 0 {
			continue
		}
		procs[pid] = own
		was, seen := o.procs[pid]
		if !seen || o.cpus == nil {
			continue
		}
		t := Took{PID: pid}
		for _, n := range allowed[i] {
			before, ok := o.cpus[int64(n)]
			if !ok {
				continue
			}
			t.Others += now[int64(n)].busy - before.busy
			t.Total += now[int64(n)].all - before.all
		}
		t.Others = min(max(t.Others-(own-was)-max(self-o.self, 0), 0), t.Total)
		out = append(out, t)
	}
	o.cpus, o.self, o.procs = now, self, procs
	return out, nil
}

// cpuSeconds is process pid's CPU time so far, every thread's (the collector's own for
// pid -1); -1 where it cannot be read.
func (o *Others) cpuSeconds(pid int) float64 {
	var p procfs.Proc
	var err error
	if pid < 0 {
		p, err = o.fs.Self()
	} else {
		p, err = o.fs.Proc(pid)
	}
	if err != nil {
		return -1
	}
	st, err := p.Stat()
	if err != nil {
		return -1
	}
	return st.CPUTime()
}
