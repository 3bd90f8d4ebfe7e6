package testbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup is a cgroup with a CPU quota or a memory limit, made for a test.
type Cgroup struct {
	Dir string // its directory in the cgroup file system
}

// CPUQuota makes a cgroup whose tasks may use cpus CPUs (a quota of cpus × 10 ms per 10 ms
// period), in the hierarchy that holds the cpu controller: v1 where it is bound there, as
// on hybrid machines, else v2. It is removed when the test ends. The period is finer than
// Kubernetes' 100 ms, and than a token's graph on a fast host: a graph traced then spans
// throttled periods, however it falls, rather than fitting between two.
func CPUQuota(t testing.TB, cpus float64) *Cgroup {
	t.Helper()
	const period = 10000 // µs
	quota := int(cpus * period)
	switch {
	case exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
		return made(t, "/sys/fs/cgroup/cpu", "", [][2]string{{"cpu.cfs_period_us", fmt.Sprint(period)}, {"cpu.cfs_quota_us", fmt.Sprint(quota)}})
	case controllerV2("cpu"):
		return made(t, "/sys/fs/cgroup", "cpu", [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, period)}})
	}
	Missing(t, "a cgroup file system with the cpu controller")
	return nil
}

// MemoryLimit makes a cgroup whose tasks may use limit bytes of memory, in the hierarchy
// that holds the memory controller (v1 where it is bound there, else v2), without swap
// beyond it where swap is accounted. It is removed when the test ends.
func MemoryLimit(t testing.TB, limit int64) *Cgroup {
	t.Helper()
	switch {
	case exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		files := [][2]string{{"memory.limit_in_bytes", fmt.Sprint(limit)}}
		if exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes") {
			files = append(files, [2]string{"memory.memsw.limit_in_bytes", fmt.Sprint(limit)})
		}
		return made(t, "/sys/fs/cgroup/memory", "", files)
	case controllerV2("memory"):
		return made(t, "/sys/fs/cgroup", "memory", [][2]string{{"memory.max", fmt.Sprint(limit)}, {"memory.swap.max", "0"}})
	}
	Missing(t, "a cgroup file system with the memory controller")
	return nil
}

// ReadLimit makes a cgroup whose tasks read at most bps bytes a second from the disk
// that holds path, in the hierarchy that holds the I/O controller (v1's blkio where it is
// bound there, else v2's io). A process in it faults a mapped file in at that rate, a
// disk's pace whatever the machine's own disk and CPU: a cold start's reads take the
// file's size over bps. It is removed when the test ends.
func ReadLimit(t testing.TB, path string, bps int64) *Cgroup {
	t.Helper()
	dev := disk(t, path)
	switch {
	case exists("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device"):
		return made(t, "/sys/fs/cgroup/blkio", "", [][2]string{{"blkio.throttle.read_bps_device", fmt.Sprintf("%s %d", dev, bps)}})
	case controllerV2("io"):
		return made(t, "/sys/fs/cgroup", "io", [][2]string{{"io.max", fmt.Sprintf("%s rbps=%d", dev, bps)}})
	}
	Missing(t, "a cgroup file system with the blkio or io controller")
	return nil
}

// disk is the MAJ:MIN of the whole disk that holds path, as the I/O controllers name it
// (a partition's disk is its parent).
func disk(t testing.TB, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if !exists(sys) {
		Missing(t, fmt.Sprintf("a block device under %s (it is on device %d:%d): a throttle of its reads", path, unix.Major(st.Dev), unix.Minor(st.Dev)))
	}
	if exists(sys + "/partition") {
		sys += "/.."
	}
	b, err := os.ReadFile(sys + "/dev")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Within is a command line that moves itself into every cgroup of cgs, each in its own
// hierarchy, then executes name and args.
func Within(cgs ...*Cgroup) func(name string, args ...string) (string, []string) {
	var dirs []string
	for _, c := range cgs {
		dirs = append(dirs, c.Dir)
	}
	return func(name string, args ...string) (string, []string) {
		script := `for d in ` + shellWords(dirs) + `; do echo $$ > "$d/cgroup.procs" || exit 1; done; exec "$@"`
		return "sh", append([]string{"-c", script, "sh", name}, args...)
	}
}

// shellWords quotes each of ws for sh, single-quoted.
func shellWords(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// made makes a cgroup under root with files written in order, removed when the test
// ends; on v2, the root hands controller down to its children first.
func made(t testing.TB, root, controller string, files [][2]string) *Cgroup {
	t.Helper()
	if controller != "" {
		if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+"+controller), 0); err != nil {
			Missing(t, "the "+controller+" controller for a cgroup v2 child: "+err.Error())
		}
	}
	c := &Cgroup{Dir: filepath.Join(root, fmt.Sprintf("profinfer-test-%d-%d", os.Getpid(), time.Now().UnixNano()))}
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		Missing(t, "a cgroup of our own: "+err.Error())
	}
	t.Cleanup(func() {
		// Its tasks have exited by now; a moment for the kernel to let go of them.
		for i := 0; i < 50 && os.Remove(c.Dir) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(c.Dir, f[0]), []byte(f[1]), 0); err != nil {
			t.Fatalf("setting %s of %s: %v", f[0], c.Dir, err)
		}
	}
	return c
}

// Command is name and args as a command line that moves itself into the cgroup, then
// executes them: what it runs is in the cgroup from its first instruction.
func (c *Cgroup) Command(name string, args ...string) (string, []string) {
	return "sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.Dir, name}, args...)
}

// Reclaim has the kernel take back from the cgroup what it can beyond its tasks'
// anonymous memory, the pages of the files they mapped, as other work's pressure would
// while they idle: v2 by memory.reclaim, v1 by lowering its limit to that for a moment.
func (c *Cgroup) Reclaim(t testing.TB) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(c.Dir, "memory.current")); err == nil { // v2
		// It says EAGAIN where it took back less than asked: what it could is gone.
		if err := os.WriteFile(filepath.Join(c.Dir, "memory.reclaim"), bytes.TrimSpace(b), 0); err != nil && !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("reclaiming %s: %v", c.Dir, err)
		}
		return
	}
	limit, err := os.ReadFile(filepath.Join(c.Dir, "memory.limit_in_bytes"))
	if err != nil {
		t.Fatalf("reclaiming %s: %v", c.Dir, err)
	}
	var rss int64
	b, _ := os.ReadFile(filepath.Join(c.Dir, "memory.stat"))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rss "); ok {
			fmt.Sscan(v, &rss)
		}
	}
	for _, v := range []string{fmt.Sprint(rss + 64<<20), string(bytes.TrimSpace(limit))} {
		if err := os.WriteFile(filepath.Join(c.Dir, "memory.limit_in_bytes"), []byte(v), 0); err != nil {
			t.Fatalf("reclaiming %s (limit %s): %v", c.Dir, v, err)
		}
	}
}

// Add moves process pid, every thread of it, into the cgroup.
func (c *Cgroup) Add(t testing.TB, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.Dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
		t.Fatalf("moving %d into %s: %v", pid, c.Dir, err)
	}
}

// Charged waits until the cgroup's tasks are charged bytes of memory or more (v2's
// memory.current, v1's memory.usage_in_bytes): a model they mapped is read in.
func (c *Cgroup) Charged(t testing.TB, ctx context.Context, bytes int64) {
	t.Helper()
	for {
		var used int64
		for _, f := range []string{"memory.current", "memory.usage_in_bytes"} {
			if b, err := os.ReadFile(filepath.Join(c.Dir, f)); err == nil {
				fmt.Sscan(string(b), &used)
			}
		}
		if used >= bytes {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s charged %d bytes, want %d: %v", c.Dir, used, bytes, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func controllerV2(name string) bool {
	b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " "+name+" ")
}

// Evict drops path's pages from the page cache, so that a process in a memory cgroup
// reads them in itself, charged to its cgroup: pages cached already stay charged to
// whichever cgroup read them first, and do not count against its limit.
func Evict(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("evicting %s from the page cache: %v", path, err)
	}
}
