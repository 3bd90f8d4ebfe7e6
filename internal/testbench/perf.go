package testbench

import (
	"fmt"
	"os"
	"time"
)

// WaitPerf waits until the perf process pid (perf stat or perf record -p) has opened its
// counters, its perf_event descriptors no longer growing: its first start on a fresh
// machine takes seconds, and what it misses meanwhile goes uncounted.
func WaitPerf(pid int, limit time.Duration) error {
	last, still := 0, 0
	for deadline := time.Now().Add(limit); still < 4; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("perf (pid %d) opened no counters within %s", pid, limit)
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			return fmt.Errorf("perf (pid %d): %w", pid, err)
		}
		n := 0
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == "anon_inode:[perf_event]" {
				n++
			}
		}
		if n > 0 && n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	return nil
}
