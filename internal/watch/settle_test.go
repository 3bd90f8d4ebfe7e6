package watch

import (
	"slices"
	"testing"
	"time"
)

// Each process waits Settle from its own last notice, not from the first notice of a
// burst: 2, noticed a moment after 1, is not looked at with 1 (it could be between mapping
// and relocating a library), and a process noticed twice waits for the second.
func TestQueueSettlesEachProcess(t *testing.T) {
	t0 := time.Unix(0, 0)
	// at is ms in units of Settle/150: the times below are those of a 150 ms Settle.
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * Settle / 150) }
	var q Queue
	if !q.Next().IsZero() || q.Due(at(1000)) != nil {
		t.Fatal("an empty queue has something due")
	}
	q.Add(1, at(0))
	q.Add(2, at(100))
	q.Add(1, at(120)) // 1 again: it waits from here
	if next := q.Next(); next != at(250) {
		t.Errorf("next %v, want 2's due time (1 was noticed again: it waits from its second notice)", next)
	}
	if due := q.Due(at(150)); len(due) != 0 {
		t.Errorf("due at 150 ms: %v, want none (1 was noticed again, 2 is not settled)", due)
	}
	if due := q.Due(at(250)); !slices.Equal(due, []int{2}) {
		t.Errorf("due at 250 ms: %v, want [2]", due)
	}
	if due := q.Due(at(270)); !slices.Equal(due, []int{1}) {
		t.Errorf("due at 270 ms: %v, want [1]", due)
	}
	if !q.Next().IsZero() {
		t.Errorf("a process left waiting")
	}
	q.Add(3, at(300))
	q.Clear()
	if !q.Next().IsZero() {
		t.Errorf("cleared, yet %v waits", q.Next())
	}
}
