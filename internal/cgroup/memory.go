package cgroup

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is what the memory cgroups with a limit at and above a process's counted as
// Watch found them, while the process lived: /proc/PID is gone once it has ended, and
// the counts tell what happened in its life only against where they stood before.
type Memory struct {
	root   string
	v1     bool
	levels []level // nearest first
}

// level is one limited cgroup and the times it had met its limit when Watch read it.
type level struct {
	dir  string
	hits uint64
}

// Limit is a memory cgroup's limit and use, read as a process in it ended.
type Limit struct {
	Cgroup string // as /proc/PID/cgroup names it
	Limit  uint64 // bytes
	Usage  uint64 // bytes charged now, which the end of the process may already have freed
	Peak   uint64 // the most ever charged, bytes; 0 where the kernel keeps none (v2 before 5.19)
}

// WatchMemory reads pid's memory cgroups with a limit, for Hit to read again once it has
// ended. A process under no limit gets a Memory whose Hit finds none.
func (r *Reader) WatchMemory(pid int) (*Memory, error) {
	root, dir, v1, err := r.cgroup(pid, "memory")
	if err != nil {
		return nil, err
	}
	m := &Memory{root: root, v1: v1}
	for {
		if lim, err := limit(dir, v1); err != nil {
			return nil, fmt.Errorf("cgroup: process %d: %w", pid, err)
		} else if lim > 0 {
			hits, err := hits(dir, v1)
			if err != nil {
				return nil, fmt.Errorf("cgroup: process %d: %w", pid, err)
			}
			m.levels = append(m.levels, level{dir, hits})
		}
		if dir == root {
			return m, nil
		}
		dir = filepath.Dir(dir)
	}
}

// Hit returns the nearest of the cgroups that met its limit since WatchMemory read it,
// with its limit and use; ok is false where none did. A cgroup met its limit when it
// could not reclaim enough to charge a page and its OOM killer ran: v2 counts that
// (memory.events oom). v1 counts only the kills in the cgroup (memory.oom_control
// oom_kill), the system's OOM killer's too, and failed charges no more on recent kernels
// (memory.failcnt stays 0): there the cgroup's peak must have reached its limit.
func (m *Memory) Hit() (l Limit, ok bool, err error) {
	for _, lv := range m.levels {
		n, err := hits(lv.dir, m.v1)
		if err != nil || n == lv.hits {
			continue // removed meanwhile, or not met
		}
		l.Cgroup = name(m.root, lv.dir)
		files := [3]string{"memory.max", "memory.current", "memory.peak"}
		if m.v1 {
			files = [3]string{"memory.limit_in_bytes", "memory.usage_in_bytes", "memory.max_usage_in_bytes"}
		}
		for i, p := range []*uint64{&l.Limit, &l.Usage, &l.Peak} {
			v, err := readInt(filepath.Join(lv.dir, files[i]))
			if err != nil && i < 2 {
				return Limit{}, false, fmt.Errorf("cgroup: %w", err)
			}
			*p = uint64(max(v, 0))
		}
		if m.v1 && l.Peak+nearLimit < l.Limit {
			continue // a kill in it, not for its limit
		}
		return l, true, nil
	}
	return Limit{}, false, nil
}

// nearLimit is how far below its limit a cgroup's peak may stay when a charge failed: a
// charge is a batch of pages, or a huge page.
const nearLimit = 8 << 20

// noLimit is where v1 reads a limit as none: PAGE_COUNTER_MAX pages, rounded down to a
// page, which is above 2^62 on every page size.
const noLimit = 1 << 62

// limit reads a cgroup's memory limit; 0 for none (or no file, as the v2 root has none).
func limit(dir string, v1 bool) (uint64, error) {
	if v1 {
		n, err := readInt(filepath.Join(dir, "memory.limit_in_bytes"))
		if err != nil || n >= noLimit {
			return 0, ignoreMissing(err)
		}
		return uint64(n), nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.max"))
	if err != nil {
		return 0, ignoreMissing(err)
	}
	if s := strings.TrimSpace(string(b)); s != "max" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/memory.max reads %q, not a limit", dir, b)
		}
		return n, nil
	}
	return 0, nil
}

// hits reads how often a cgroup met its limit, as far as its counts say (see Hit).
func hits(dir string, v1 bool) (uint64, error) {
	file, key := "memory.events", "oom "
	if v1 {
		file, key = "memory.oom_control", "oom_kill "
	}
	path := filepath.Join(dir, file)
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q is not a count", path, sc.Text())
			}
			return n, nil
		}
	}
	return 0, sc.Err()
}
