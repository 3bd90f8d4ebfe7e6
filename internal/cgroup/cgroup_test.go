package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tree writes a proc root whose process 7 is in the cgroups of pidCgroup, with the
// cgroup file systems of mounts (mountinfo lines, %s the temporary directory), and files.
func tree(t *testing.T, pidCgroup, mounts string, files map[string]string) *Reader {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/7/cgroup", pidCgroup)
	write("proc/self/mountinfo", strings.ReplaceAll(mounts, "%s", dir))
	for name, text := range files {
		write(name, text)
	}
	r, err := NewReader(filepath.Join(dir, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const (
	unified = "30 23 0:27 / %s/sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	hybrid  = "31 23 0:28 / %s/cg rw - tmpfs tmpfs rw\n32 31 0:29 / %s/cg/cpu rw - cgroup cgroup rw,cpu\n" +
		"33 31 0:30 / %s/cg/cpuset rw - cgroup cgroup rw,cpuset\n34 31 0:38 / %s/cg/unified rw - cgroup2 cgroup2 rw\n"
)

func TestV2TightestAncestor(t *testing.T) {
	// A pod limited to 1.5 CPUs, its container to 2: the pod's quota binds.
	r := tree(t, "0::/kubepods/pod1/ctr\n", unified, map[string]string{
		"sys/fs/cgroup/kubepods/pod1/cpu.max":      "150000 100000\n",
		"sys/fs/cgroup/kubepods/pod1/cpu.stat":     "usage_usec 9\nnr_periods 40\nnr_throttled 10\nthrottled_usec 2500000\n",
		"sys/fs/cgroup/kubepods/pod1/ctr/cpu.max":  "200000 100000\n",
		"sys/fs/cgroup/kubepods/pod1/ctr/cpu.stat": "nr_periods 40\nnr_throttled 0\nthrottled_usec 0\n",
		"sys/fs/cgroup/kubepods/cpu.max":           "max 100000\n",
	})
	c, err := r.CPU(7)
	want := CPU{Cgroup: "/kubepods/pod1", Quota: 150 * time.Millisecond, Period: 100 * time.Millisecond,
		Periods: 40, Throttled: 10, ThrottledTime: 2500 * time.Millisecond}
	if err != nil || c != want {
		t.Fatalf("got %+v, %v; want %+v", c, err, want)
	}
	if c.CPUs() != 1.5 {
		t.Fatalf("%v CPUs", c.CPUs())
	}
}

func TestV1Hybrid(t *testing.T) {
	// The cpu controller bound to v1, as on this project's machines: the unified
	// hierarchy's line is not the one that limits.
	r := tree(t, "4:cpuset:/\n3:cpu:/job\n0::/\n", hybrid, map[string]string{
		"cg/cpu/job/cpu.cfs_quota_us":  "50000\n",
		"cg/cpu/job/cpu.cfs_period_us": "100000\n",
		"cg/cpu/job/cpu.stat":          "nr_periods 12\nnr_throttled 11\nthrottled_time 900000000\nnr_bursts 0\n",
		"cg/cpu/cpu.cfs_quota_us":      "-1\n",
		"cg/cpu/cpu.cfs_period_us":     "100000\n",
	})
	c, err := r.CPU(7)
	want := CPU{Cgroup: "/job", Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond,
		Periods: 12, Throttled: 11, ThrottledTime: 900 * time.Millisecond}
	if err != nil || c != want {
		t.Fatalf("got %+v, %v; want %+v", c, err, want)
	}
}

func TestNoQuota(t *testing.T) {
	r := tree(t, "0::/user.slice\n", unified, map[string]string{"sys/fs/cgroup/user.slice/cpu.max": "max 100000\n"})
	if c, err := r.CPU(7); err != nil || c != (CPU{}) {
		t.Fatalf("got %+v, %v; want no quota", c, err)
	}
}

func TestErrorsNameTheCause(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup, mounts string
		files                map[string]string
		want                 string
	}{
		{"another namespace", "0::/../../other\n", unified, nil, "its cgroup /../../other is outside this collector's cgroup namespace"},
		{"no v2 mount", "0::/a\n", "", nil, "the cgroup v2 file system is not mounted here"},
		{"no v1 mount", "3:cpu,cpuacct:/a\n0::/\n", unified, nil, "the cpu controller's cgroup v1 hierarchy is not mounted here"},
		{"bad cpu.max", "0::/a\n", unified, map[string]string{"sys/fs/cgroup/a/cpu.max": "lots\n"}, `cpu.max reads "lots\n", not a quota and a period`},
		{"bad quota", "3:cpu:/a\n", hybrid, map[string]string{"cg/cpu/a/cpu.cfs_quota_us": "x\n"}, `cpu.cfs_quota_us reads "x\n", not a number`},
	} {
		_, err := tree(t, tc.cgroup, tc.mounts, tc.files).CPU(7)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestThisMachine reads the collector's own cgroup: whatever the machine, no error.
func TestThisMachine(t *testing.T) {
	r, err := NewReader("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

// The memory cgroup that met its limit in a process's life is the one named: on v2 by
// its OOM events, the container's here, not the pod's, which had met its own before.
func TestMemoryHitV2(t *testing.T) {
	r := tree(t, "0::/pod/ctr\n", unified, map[string]string{
		"sys/fs/cgroup/pod/memory.max":         "2000000000\n",
		"sys/fs/cgroup/pod/memory.events":      "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n",
		"sys/fs/cgroup/pod/ctr/memory.max":     "600000000\n",
		"sys/fs/cgroup/pod/ctr/memory.events":  "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"sys/fs/cgroup/pod/ctr/memory.current": "599990000\n",
		"sys/fs/cgroup/pod/ctr/memory.peak":    "600000000\n",
		"sys/fs/cgroup/memory.max":             "max\n",
	})
	m, err := r.WatchMemory(7)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.Hit(); ok || err != nil {
		t.Fatalf("a limit met before: %v, %v", ok, err)
	}
	dir := filepath.Join(m.root, "pod")
	for _, f := range []string{"memory.events", "ctr/memory.events"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("low 0\nhigh 0\nmax 40\noom 2\noom_kill 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, ok, err := m.Hit()
	if want := (Limit{Cgroup: "/pod/ctr", Limit: 600000000, Usage: 599990000, Peak: 600000000}); !ok || err != nil || l != want {
		t.Fatalf("got %+v, %v, %v; want %+v", l, ok, err, want)
	}
}

// On v1 (the memory controller bound there, as on this project's machines) by the kills
// in it, where its peak reached its limit; a cgroup whose limit is none is passed over.
func TestMemoryHitV1(t *testing.T) {
	mounts := hybrid + "35 31 0:31 / %s/cg/memory rw - cgroup cgroup rw,memory\n"
	r := tree(t, "5:memory:/job\n3:cpu:/\n0::/\n", mounts, map[string]string{
		"cg/memory/job/memory.limit_in_bytes":     "629145600\n",
		"cg/memory/job/memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
		"cg/memory/job/memory.usage_in_bytes":     "1000\n",
		"cg/memory/job/memory.max_usage_in_bytes": "500000000\n",
		"cg/memory/memory.limit_in_bytes":         "9223372036854771712\n",
	})
	m, err := r.WatchMemory(7)
	if err != nil || len(m.levels) != 1 {
		t.Fatalf("%+v, %v", m, err)
	}
	if err := os.WriteFile(filepath.Join(m.root, "job/memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.Hit(); ok || err != nil {
		t.Fatalf("a kill far below the limit taken for the cgroup's: %v, %v", ok, err)
	}
	if err := os.WriteFile(filepath.Join(m.root, "job/memory.max_usage_in_bytes"), []byte("629000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, ok, err := m.Hit()
	if want := (Limit{Cgroup: "/job", Limit: 629145600, Usage: 1000, Peak: 629000000}); !ok || err != nil || l != want {
		t.Fatalf("got %+v, %v, %v; want %+v", l, ok, err, want)
	}
}
