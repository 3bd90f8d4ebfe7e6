package cpus

import (
	"github.com/prometheus/procfs"
)

// Idle is each CPU's idle and total seconds so far, as /proc/stat counts them, at one
// moment. Two readings say how much of the CPUs a process may run on sat idle between
// them: a neighbour busy on the other cores is the evidence a rule needs before it
// advises using them, whatever the process's own threads did.
type Idle map[int64]cpuTime

// cpuTime is a CPU's seconds idle (iowait counted idle) and in all.
type cpuTime struct{ idle, all float64 }

// ReadIdle reads every CPU's time from fs's stat file: one small file, once a metrics
// export and once a process's end.
func ReadIdle(fs procfs.FS) (Idle, error) {
	st, err := fs.Stat()
	if err != nil {
		return nil, err
	}
	out := make(Idle, len(st.CPU))
	for n, c := range st.CPU {
		idle := c.Idle + c.Iowait
		out[n] = cpuTime{idle: idle, all: idle + c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal}
	}
	return out, nil
}

// Since returns the seconds the CPUs of list sat idle, and their seconds in all, between
// the reading then and now.
func (now Idle) Since(then Idle, list []int) (idle, all float64) {
	for _, n := range list {
		a, ok := then[int64(n)]
		b, ok2 := now[int64(n)]
		if !ok || !ok2 {
			continue
		}
		idle += max(b.idle-a.idle, 0)
		all += max(b.all-a.all, 0)
	}
	return idle, all
}
