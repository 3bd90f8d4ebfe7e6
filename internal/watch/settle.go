package watch

import (
	"slices"
	"time"
)

// Settle is how long after its last notice a process is looked at: an exec's notice comes
// before the dynamic loader maps the libraries, and a dlopen's in a burst of notices,
// before the loader relocates what it mapped. Each process waits from its own notices. It
// is short: a process's first decode may come a few hundred milliseconds after it loads
// GGML (a small model, a server that answers at once), and GGML's code must be probed by
// then. A process looked at between mapping and relocation is looked at again
// (ggml.ErrNotRelocated).
const Settle = 20 * time.Millisecond

// Queue holds the processes noticed, each until Settle after its last notice. It is not
// safe for concurrent use.
type Queue struct {
	waiting []waiting // in the order of their last notices, so also by due
}

type waiting struct {
	pid int
	due time.Time
}

// Add notes that process pid was noticed at now: it waits from now, and leaves its place
// if it was waiting, so that no wakeup comes for the earlier due time.
func (q *Queue) Add(pid int, now time.Time) {
	q.waiting = slices.DeleteFunc(q.waiting, func(w waiting) bool { return w.pid == pid })
	q.waiting = append(q.waiting, waiting{pid, now.Add(Settle)})
}

// Next returns when the first process is due (zero: none waits).
func (q *Queue) Next() time.Time {
	if len(q.waiting) == 0 {
		return time.Time{}
	}
	return q.waiting[0].due
}

// Due removes and returns the processes due at now.
func (q *Queue) Due(now time.Time) []int {
	n := 0
	for n < len(q.waiting) && !now.Before(q.waiting[n].due) {
		n++
	}
	var due []int
	for _, w := range q.waiting[:n] {
		due = append(due, w.pid)
	}
	q.waiting = append(q.waiting[:0], q.waiting[n:]...)
	return due
}

// Clear forgets every process waiting: a scan of /proc looked at them all.
func (q *Queue) Clear() { q.waiting = q.waiting[:0] }
