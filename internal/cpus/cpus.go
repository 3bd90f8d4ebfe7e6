// Package cpus counts the CPUs a process may run on against the machine's topology: its
// affinity (which a cpuset bounds), the physical cores among them (SMT siblings share
// one), and on a hybrid CPU its performance cores. ggml's threads wait for each other at
// every node, so threads beyond any of these make every node wait for the slowest.
package cpus

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/sysfs"
)

// Topology is what the machine's CPUs are: each logical CPU's core, and which are a
// hybrid CPU's performance cores.
type Topology struct {
	core        map[int]int  // logical CPU → its core, named by its lowest SMT sibling
	performance map[int]bool // nil where the CPUs are all of a kind
}

// Read reads the topology under sys (/sys): each CPU's SMT siblings, and the performance
// cores of a hybrid CPU, named by its core PMU (Intel's cpu_core, beside cpu_atom) or
// by the CPUs' capacities (Arm's big.LITTLE: the largest are the performance cores).
func Read(sys string) (Topology, error) {
	fs, err := sysfs.NewFS(sys)
	if err != nil {
		return Topology{}, err
	}
	all, err := fs.CPUs()
	if err != nil {
		return Topology{}, fmt.Errorf("cpus: %w", err)
	}
	t := Topology{core: map[int]int{}}
	capacity := map[int]int{}
	for _, c := range all {
		n, err := strconv.Atoi(c.Number())
		if err != nil {
			continue
		}
		t.core[n] = n
		if top, err := c.Topology(); err == nil {
			if sib, err := List(top.ThreadSiblingsList); err == nil && len(sib) > 0 {
				t.core[n] = sib[0]
			}
		}
		if b, err := os.ReadFile(filepath.Join(sys, "devices/system/cpu", "cpu"+c.Number(), "cpu_capacity")); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				capacity[n] = v
			}
		}
	}
	if len(t.core) == 0 {
		return Topology{}, fmt.Errorf("cpus: no CPU under %s", sys)
	}
	if b, err := os.ReadFile(filepath.Join(sys, "devices/cpu_core/cpus")); err == nil {
		if _, hybrid := os.Stat(filepath.Join(sys, "devices/cpu_atom/cpus")); hybrid == nil {
			if p, err := List(string(b)); err == nil {
				t.performance = set(p)
			}
		}
	} else if len(capacity) > 1 {
		top := 0
		for _, v := range capacity {
			top = max(top, v)
		}
		var p []int
		for n, v := range capacity {
			if v == top {
				p = append(p, n)
			}
		}
		if len(p) < len(capacity) {
			t.performance = set(p)
		}
	}
	return t, nil
}

func set(xs []int) map[int]bool {
	m := make(map[int]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Count is what a process may run on: logical CPUs, the physical cores among them, and,
// on a hybrid CPU, the performance cores among them (0 on others).
type Count struct {
	Allowed, Cores, Performance int
}

// Of counts the CPUs in allowed, a process's affinity.
func (t Topology) Of(allowed []int) Count {
	c := Count{Allowed: len(allowed)}
	cores := map[int]bool{}
	perf := map[int]bool{}
	for _, n := range allowed {
		core, ok := t.core[n]
		if !ok {
			core = n
		}
		cores[core] = true
		if t.performance[n] {
			perf[core] = true
		}
	}
	c.Cores = len(cores)
	if t.performance != nil {
		c.Performance = len(perf)
	}
	return c
}

// Allowed reads the affinity of process pid's main thread under proc (/proc): the CPUs
// it may run on (sched_setaffinity, taskset, a cpuset).
func Allowed(proc string, pid int) ([]int, error) {
	fs, err := procfs.NewFS(proc)
	if err != nil {
		return nil, err
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return nil, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return nil, err
	}
	out := make([]int, len(st.CpusAllowedList))
	for i, n := range st.CpusAllowedList {
		out[i] = int(n)
	}
	return out, nil
}

// maxCPUs bounds a range in a CPU list: the kernel's NR_CPUS is at most 8192.
const maxCPUs = 1 << 13

// List parses a kernel CPU list ("0-3,8,10-11").
func List(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpus: bad list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > maxCPUs {
				return nil, fmt.Errorf("cpus: bad list %q", s)
			}
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
