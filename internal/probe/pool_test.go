package probe

import (
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
)

// fakeLink counts its closes.
type fakeLink struct {
	link.Link
	closed *int
}

func (f fakeLink) Close() error { *f.closed++; return nil }

func TestPoolPlacesOncePerFile(t *testing.T) {
	pool := NewPool()
	var placed, closed int
	place := func() (link.Link, bool, error) { placed++; return fakeLink{closed: &closed}, true, nil }
	at := placement{dev: 1, inode: 2, at: 0x100}
	a, emulated, err := pool.hold(at, place)
	if err != nil || !emulated {
		t.Fatalf("hold: %v, emulated %v", err, emulated)
	}
	b, emulated, _ := pool.hold(at, place)
	if placed != 1 || !emulated {
		t.Fatalf("a second process placed it again (%d placements), emulated %v", placed, emulated)
	}
	if _, _, err := pool.hold(placement{dev: 1, inode: 2, at: 0x100, ret: true}, place); err != nil || placed != 2 {
		t.Fatalf("the return probe at the same place: %d placements, %v", placed, err)
	}

	a.Close()
	a.Close() // once only
	if gone := pool.Sweep(time.Now().Add(time.Hour)); len(gone) != 0 {
		t.Fatalf("swept %d probes that a process still holds", len(gone))
	}
	b.Close()
	if gone := pool.Sweep(time.Now().Add(Linger / 2)); len(gone) != 0 {
		t.Fatalf("swept %d probes before they lingered", len(gone))
	}
	gone := pool.Sweep(time.Now().Add(Linger))
	if len(gone) != 1 {
		t.Fatalf("swept %d probes after Linger, want the one no process holds", len(gone))
	}
	gone.Close()
	if closed != 1 {
		t.Fatalf("%d closed, want 1", closed)
	}

	if _, _, err := pool.hold(at, place); err != nil || placed != 3 {
		t.Fatalf("after its sweep, a probe is placed anew: %d placements, %v", placed, err)
	}
	if err := pool.Close(); err != nil || closed != 3 {
		t.Fatalf("Close closed %d in all, want 3 (%v)", closed, err)
	}
}
