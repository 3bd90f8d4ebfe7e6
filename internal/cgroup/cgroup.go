// Package cgroup reads the CPU quota a process runs under and how often it was throttled:
// cpu.max and cpu.stat on cgroup v2, cpu.cfs_quota_us, cpu.cfs_period_us and cpu.stat on
// v1. A quota on any cgroup above the process's limits it too, so every level up to the
// hierarchy's root is read and the tightest one reported. It also tells which memory
// cgroup's limit a process met as it ended (memory.go).
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// CPU is the tightest CPU quota over a process's cgroups, and that cgroup's throttling.
type CPU struct {
	// Cgroup is the limiting cgroup, as /proc/PID/cgroup names it; empty without a quota.
	Cgroup        string
	Quota, Period time.Duration // CPU time the cgroup may use per period
	// Periods counts the enforcement periods in which the cgroup had runnable tasks,
	// Throttled those in which it ran out of quota; ThrottledTime sums, over CPUs, the
	// time its tasks were held back. All cumulative since the cgroup was made.
	Periods, Throttled uint64
	ThrottledTime      time.Duration
}

// CPUs is the number of CPUs the quota amounts to; 0 without one.
func (c CPU) CPUs() float64 {
	if c.Period <= 0 {
		return 0
	}
	return float64(c.Quota) / float64(c.Period)
}

// Reader finds processes' cgroups under the cgroup file systems mounted in the reader's
// own mount namespace.
type Reader struct {
	proc   procfs.FS
	mounts []*procfs.MountInfo
}

// NewReader reads the mounts of the calling process, under the proc file system at
// procRoot.
func NewReader(procRoot string) (*Reader, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	mounts, err := fs.GetMounts()
	if err != nil {
		return nil, fmt.Errorf("cgroup: reading the mounts: %w", err)
	}
	return &Reader{proc: fs, mounts: mounts}, nil
}

// hierarchy is where one cgroup hierarchy of a process is mounted, and its version.
type hierarchy struct {
	v1    bool
	mount *procfs.MountInfo
	path  string // the process's cgroup in it
}

// CPU reads pid's CPU quota and throttling. A process under no quota gets a zero CPU and
// no error.
func (r *Reader) CPU(pid int) (CPU, error) {
	root, dir, v1, err := r.cgroup(pid, "cpu")
	if err != nil {
		return CPU{}, err
	}
	var best CPU
	for {
		c, err := readLimit(dir, v1)
		if err != nil {
			return CPU{}, fmt.Errorf("cgroup: process %d: %w", pid, err)
		}
		if c.Period > 0 && (best.Period == 0 || c.CPUs() < best.CPUs()) {
			c.Cgroup = name(root, dir)
			best = c
		}
		if dir == root {
			break
		}
		dir = filepath.Dir(dir)
	}
	if best.Period == 0 {
		return CPU{}, nil
	}
	if err := readStat(filepath.Join(root, best.Cgroup, "cpu.stat"), v1, &best); err != nil {
		return CPU{}, fmt.Errorf("cgroup: process %d: %w", pid, err)
	}
	return best, nil
}

// cgroup finds pid's cgroup in the hierarchy that holds controller: the hierarchy's mount
// point, the cgroup's directory under it, and whether it is v1.
func (r *Reader) cgroup(pid int, controller string) (root, dir string, v1 bool, err error) {
	p, err := r.proc.Proc(pid)
	if err != nil {
		return "", "", false, err
	}
	cgs, err := p.Cgroups()
	if err != nil {
		return "", "", false, fmt.Errorf("cgroup: process %d: %w", pid, err)
	}
	h, err := r.hierarchy(cgs, controller)
	if err != nil {
		return "", "", false, fmt.Errorf("cgroup: process %d: %w", pid, err)
	}
	root = h.mount.MountPoint
	rel := h.path
	if h.mount.Root != "/" {
		// A mount of a sub-tree: the process's path must lie under it.
		var ok bool
		if rel, ok = strings.CutPrefix(rel, h.mount.Root); !ok || rel != "" && rel[0] != '/' {
			return "", "", false, fmt.Errorf("cgroup: process %d: its cgroup %s is outside the %s mounted at %s", pid, h.path, h.mount.Root, root)
		}
	}
	dir = filepath.Join(root, rel)
	if dir != root && !strings.HasPrefix(dir, root+"/") {
		// /proc/PID/cgroup names a cgroup outside the reader's cgroup namespace as ../..
		return "", "", false, fmt.Errorf("cgroup: process %d: its cgroup %s is outside this collector's cgroup namespace", pid, h.path)
	}
	return root, dir, h.v1, nil
}

// name is a cgroup's directory under its hierarchy's mount point as /proc/PID/cgroup
// names it.
func name(root, dir string) string {
	return "/" + strings.TrimPrefix(strings.TrimPrefix(dir, root), "/")
}

// hierarchy is the hierarchy that holds controller: a v1 one where it is bound to v1 (a
// hybrid system), else the unified one.
func (r *Reader) hierarchy(cgs []procfs.Cgroup, controller string) (hierarchy, error) {
	var unified *procfs.Cgroup
	for i, cg := range cgs {
		if cg.HierarchyID == 0 {
			unified = &cgs[i]
			continue
		}
		if !slices.Contains(cg.Controllers, controller) {
			continue
		}
		for _, m := range r.mounts {
			if _, ok := m.SuperOptions[controller]; ok && m.FSType == "cgroup" {
				return hierarchy{v1: true, mount: m, path: cg.Path}, nil
			}
		}
		return hierarchy{}, fmt.Errorf("the %s controller's cgroup v1 hierarchy is not mounted here", controller)
	}
	if unified == nil {
		return hierarchy{}, fmt.Errorf("in no cgroup hierarchy with the %s controller", controller)
	}
	for _, m := range r.mounts {
		if m.FSType == "cgroup2" {
			return hierarchy{mount: m, path: unified.Path}, nil
		}
	}
	return hierarchy{}, errors.New("the cgroup v2 file system is not mounted here")
}

// readLimit reads one cgroup's quota; a cgroup without one (or without the controller's
// files, as the v2 root has none) has a zero Period.
func readLimit(dir string, v1 bool) (CPU, error) {
	if v1 {
		quota, err := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
		if err != nil || quota < 0 {
			return CPU{}, ignoreMissing(err)
		}
		period, err := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
		if err != nil || period <= 0 {
			return CPU{}, ignoreMissing(err)
		}
		return CPU{Quota: time.Duration(quota) * time.Microsecond, Period: time.Duration(period) * time.Microsecond}, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return CPU{}, ignoreMissing(err)
	}
	// "max 100000" or "50000 100000".
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return CPU{}, fmt.Errorf("%s/cpu.max reads %q, not a quota and a period", dir, b)
	}
	if f[0] == "max" {
		return CPU{}, nil
	}
	quota, err1 := strconv.ParseInt(f[0], 10, 64)
	period, err2 := strconv.ParseInt(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil || quota < 0 || period <= 0 {
		return CPU{}, fmt.Errorf("%s/cpu.max reads %q, not a quota and a period", dir, b)
	}
	return CPU{Quota: time.Duration(quota) * time.Microsecond, Period: time.Duration(period) * time.Microsecond}, nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s reads %q, not a number", path, b)
	}
	return n, nil
}

// readStat reads the throttling counts: throttled_time in ns on v1, throttled_usec on v2.
func readStat(path string, v1 bool, c *CPU) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a count", path, sc.Text())
		}
		switch {
		case k == "nr_periods":
			c.Periods = n
		case k == "nr_throttled":
			c.Throttled = n
		case k == "throttled_time" && v1:
			c.ThrottledTime = time.Duration(n)
		case k == "throttled_usec" && !v1:
			c.ThrottledTime = time.Duration(n) * time.Microsecond
		}
	}
	return sc.Err()
}
