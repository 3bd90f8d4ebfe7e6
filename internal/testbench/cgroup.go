package testbench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Cgroup is a cgroup with a CPU quota, made for a test.
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
	name := fmt.Sprintf("profinfer-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	const period = 10000 // µs
	quota := int(cpus * period)
	var c Cgroup
	var files [][2]string
	switch {
	case exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
		c.Dir = filepath.Join("/sys/fs/cgroup/cpu", name)
		files = [][2]string{{"cpu.cfs_period_us", fmt.Sprint(period)}, {"cpu.cfs_quota_us", fmt.Sprint(quota)}}
	case controllerV2("cpu"):
		// The root must hand the controller down to its children.
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+cpu"), 0); err != nil {
			Missing(t, "the cpu controller for a cgroup v2 child: "+err.Error())
		}
		c.Dir = filepath.Join("/sys/fs/cgroup", name)
		files = [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, period)}}
	default:
		Missing(t, "a cgroup file system with the cpu controller")
	}
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
	return &c
}

// Command is name and args as a command line that moves itself into the cgroup, then
// executes them: what it runs is in the cgroup from its first instruction.
func (c *Cgroup) Command(name string, args ...string) (string, []string) {
	return "sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.Dir, name}, args...)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func controllerV2(name string) bool {
	b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " "+name+" ")
}
