package cpus

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
)

// Two readings of /proc/stat say how long each CPU sat idle between them, iowait counted
// idle: over CPUs 0 and 1, one busy throughout and one idle but for a tenth.
func TestIdleSince(t *testing.T) {
	read := func(stat string) Idle {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		fs, err := procfs.NewFS(dir)
		if err != nil {
			t.Fatal(err)
		}
		idle, err := ReadIdle(fs)
		if err != nil {
			t.Fatal(err)
		}
		return idle
	}
	// USER_HZ 100: 1000 ticks are 10 s.
	then := read("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 100 0 0 1000 0 0 0 0 0 0\ncpu1 0 0 0 1000 0 0 0 0 0 0\ncpu2 0 0 0 0 0 0 0 0 0 0\n")
	now := read("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 1100 0 0 1000 0 0 0 0 0 0\ncpu1 50 0 50 1850 50 0 0 0 0 0\ncpu2 0 0 0 0 0 0 0 0 0 0\n")
	idle, all := now.Since(then, []int{0, 1, 7})
	if math.Abs(idle-9) > 1e-9 || math.Abs(all-20) > 1e-9 {
		t.Errorf("idle %.2f s of %.2f, want 9 of 20", idle, all)
	}
}
