package perfcount

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Slots is how many threads can have counters open at once, and PerThread how many
// counters each; they match COUNTER_SLOTS in bpf/counters.bpf.h and MAX_COUNTERS in bpf/events.bpf.h.
const (
	Slots     = 256
	PerThread = 8
)

// ErrFull says every slot is in use: Sweep frees those of threads gone.
var ErrFull = fmt.Errorf("perf counters: all %d thread slots in use", Slots)

// Table is where the eBPF programs find the counters: Events maps slot*PerThread+i to
// the descriptor of counter i of the thread in slot, Slots maps a tid to its slot. The
// profinfer maps satisfy it.
type Table interface {
	PutEvent(index uint32, fd int) error
	DeleteEvent(index uint32) error
	PutSlot(tid, slot uint32) error
	DeleteSlot(tid uint32) error
}

// Threads opens the counters on threads as they are met and closes them when their
// process is gone. It is not safe for concurrent use.
type Threads struct {
	counters []Counter
	table    Table
	open     map[uint32]*thread // by tid
	free     []uint32           // slots not in use
}

type thread struct {
	pid  uint32
	slot uint32
	fds  []int
}

// NewThreads returns an opener for counters (at most PerThread), published in table.
func NewThreads(counters []Counter, table Table) (*Threads, error) {
	if len(counters) > PerThread {
		return nil, fmt.Errorf("%d perf counters configured, at most %d fit a record", len(counters), PerThread)
	}
	t := &Threads{counters: counters, table: table, open: map[uint32]*thread{}}
	for s := Slots; s > 0; s-- {
		t.free = append(t.free, uint32(s-1))
	}
	return t, nil
}

// Has says whether thread tid has its counters open.
func (t *Threads) Has(tid uint32) bool { return t.open[tid] != nil }

// Open opens every counter on thread tid of process pid, and publishes them. They count
// from zero from now on.
func (t *Threads) Open(pid, tid uint32) error {
	if t.open[tid] != nil {
		return nil
	}
	if len(t.free) == 0 {
		return ErrFull
	}
	th := &thread{pid: pid, slot: t.free[len(t.free)-1]}
	for i, c := range t.counters {
		fd, err := open(c, int(tid))
		if err == nil {
			th.fds = append(th.fds, fd)
			err = t.table.PutEvent(th.slot*PerThread+uint32(i), fd)
		}
		if err != nil {
			t.release(th)
			return fmt.Errorf("perf counter %s on thread %d of pid %d: %w", c.Name, tid, pid, err)
		}
	}
	// The slot goes in last: the programs read no counter of a thread until all are in.
	if err := t.table.PutSlot(tid, th.slot); err != nil {
		t.release(th)
		return fmt.Errorf("perf counters on thread %d of pid %d: %w", tid, pid, err)
	}
	t.free = t.free[:len(t.free)-1]
	t.open[tid] = th
	return nil
}

// Sweep closes the counters of the threads for which keep(pid, tid) is false: exited
// threads, or the threads of a process no longer traced.
func (t *Threads) Sweep(keep func(pid, tid uint32) bool) error {
	var errs []error
	for tid, th := range t.open {
		if keep(th.pid, tid) {
			continue
		}
		errs = append(errs, t.close(tid, th))
	}
	return errors.Join(errs...)
}

// Started opens the counters of thread tid, which has just started: any still open on
// tid were a thread's that had the tid before, and are closed first.
func (t *Threads) Started(pid, tid uint32) error {
	if th := t.open[tid]; th != nil {
		if err := t.close(tid, th); err != nil {
			return fmt.Errorf("perf counters of an earlier thread %d: %w", tid, err)
		}
	}
	return t.Open(pid, tid)
}

// close unpublishes and closes th's counters, and frees its slot.
func (t *Threads) close(tid uint32, th *thread) error {
	err := errors.Join(t.table.DeleteSlot(tid), t.release(th))
	t.free = append(t.free, th.slot)
	delete(t.open, tid)
	return err
}

// release unpublishes and closes the descriptors of th.
func (t *Threads) release(th *thread) error {
	var errs []error
	for i, fd := range th.fds {
		errs = append(errs, t.table.DeleteEvent(th.slot*PerThread+uint32(i)))
		unix.Close(fd)
	}
	th.fds = nil
	return errors.Join(errs...)
}
