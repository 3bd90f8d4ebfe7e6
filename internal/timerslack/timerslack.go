// Package timerslack sets how late the kernel may fire the collector's timers.
//
// While any goroutine runs, the Go runtime's monitor thread (sysmon) sleeps 20 µs at a
// time, and each sleep ends in a wakeup on a core the model needs. With the kernel's
// default slack of 50 µs a millisecond's burst of the collector's work (a second of the
// ring buffer, drained) wakes it some fifteen times. With a few milliseconds of slack
// the kernel fires those sleeps with its own timer interrupts, or that late: a burst
// wakes it once or twice. Sleeping longer than asked is always allowed, so nothing in
// the collector depends on it.
package timerslack

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/caps"
)

// ErrPrivilege is why threads other than the caller keep their slack: setting another
// thread's needs CAP_SYS_NICE, which this process lacks.
var ErrPrivilege = errors.New("setting another thread's timer slack needs CAP_SYS_NICE")

// Set gives every thread of this process slack, and so the threads they start from
// now on, which inherit it. set is how many of its threads have it; err says why the
// others do not.
func Set(slack time.Duration) (set, threads int, err error) {
	if slack <= 0 {
		return 0, 0, fmt.Errorf("timer slack %s: must be positive", slack)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The caller's own needs no privilege.
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0); err != nil {
		return 0, 0, fmt.Errorf("timer slack: prctl: %w", err)
	}
	self := unix.Gettid()
	value := []byte(strconv.FormatInt(int64(slack), 10))
	done := map[int]bool{self: true}
	// Twice: a thread started during the first pass may have inherited the old slack.
	for range 2 {
		ents, rerr := os.ReadDir("/proc/self/task")
		if rerr != nil {
			return 1, 1, fmt.Errorf("timer slack: %w", rerr)
		}
		set, threads, err = 0, len(ents), nil
		for _, e := range ents {
			tid, perr := strconv.Atoi(e.Name())
			if perr != nil {
				continue
			}
			if done[tid] {
				set++
				continue
			}
			// Only the thread's own directory has the file, not its entry in task/.
			werr := os.WriteFile("/proc/"+e.Name()+"/timerslack_ns", value, 0)
			switch {
			case werr == nil:
				done[tid] = true
				set++
			case errors.Is(werr, os.ErrNotExist): // the thread is gone
			case errors.Is(werr, os.ErrPermission):
				err = denied(werr)
			default:
				err = fmt.Errorf("timer slack of thread %d: %w", tid, werr)
			}
		}
	}
	return set, threads, err
}

// denied is why a write the kernel refused was: the missing capability, else what it said
// (a security module's refusal).
func denied(werr error) error {
	if nice, known := caps.Have(unix.CAP_SYS_NICE); known && !nice {
		return ErrPrivilege
	}
	return fmt.Errorf("timer slack refused with CAP_SYS_NICE held: %w", werr)
}

// Of returns thread tid's timer slack, as /proc sees it.
func Of(tid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/timerslack_ns")
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns), err
}
