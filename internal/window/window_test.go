package window

import (
	"testing"
	"time"
)

// clock is a fake clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time               { return c.t }
func (c *clock) advance(d time.Duration)      { c.t = c.t.Add(d) }
func (c *clock) at(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }

// probes record what the scheduler did to them; fail makes Open attach nothing.
type probes struct {
	opened, closed, catchUps int
	fail                     bool
}

func (p *probes) Open(catchUp bool) bool {
	if p.fail {
		return false
	}
	p.opened++
	if catchUp {
		p.catchUps++
	}
	return true
}

func (p *probes) Close() { p.closed++ }

func TestWindows(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	s := New(10*time.Second, c.now)
	a := &probes{}
	if !s.Add(1, "bench", a) || a.opened != 1 {
		t.Fatalf("the first window did not open at once: %+v", a)
	}
	if next := s.Next(); !next.IsZero() {
		t.Errorf("next window at %v while the only one is open", next)
	}
	// An idle target keeps its window open, however long it takes.
	c.advance(time.Hour)
	if s.Tick(); a.opened != 1 || a.closed != 0 {
		t.Errorf("an open window was touched by time alone: %+v", a)
	}
	if next := s.Filled(1); next != c.at(time.Hour+10*time.Second) || a.closed != 1 {
		t.Errorf("filled: closed %d, next window at %v; want one close and the interval after", a.closed, next)
	}
	if s.Filled(1); a.closed != 1 {
		t.Errorf("a closed window was closed again")
	}
	c.advance(9 * time.Second)
	if s.Tick(); a.opened != 1 {
		t.Errorf("a window opened before its interval passed")
	}
	c.advance(time.Second)
	if next := s.Tick(); a.opened != 2 || !next.IsZero() {
		t.Errorf("due window: opened %d, next %v", a.opened, next)
	}
}

// A process whose node probes cannot be attached is tried again an interval later, not
// at every tick; the next window of several processes is the soonest one's.
func TestFailedOpenAndSoonest(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	s := New(10*time.Second, c.now)
	bad := &probes{fail: true}
	if s.Add(1, "a", bad) {
		t.Fatal("a window opened with no probe attached")
	}
	good := &probes{}
	s.Add(2, "b", good)
	c.advance(3 * time.Second)
	s.Filled(2) // next at 13 s; the failed one's at 10 s
	if next := s.Tick(); next != c.at(10*time.Second) {
		t.Errorf("next window at %v, want the failed process's retry at 10s", next)
	}
	bad.fail = false
	c.advance(5 * time.Second)
	if s.Tick(); bad.opened != 0 {
		t.Errorf("retried before the interval")
	}
	c.advance(2 * time.Second)
	if next := s.Tick(); bad.opened != 1 || next != c.at(13*time.Second) {
		t.Errorf("retry: opened %d, next %v; want one open and the other's window at 13s", bad.opened, next)
	}
	s.Remove(2)
	if next := s.Next(); !next.IsZero() {
		t.Errorf("a removed process still scheduled: next %v", next)
	}
}

// A process that runs the command of one whose window opened or closed less than an
// interval ago waits for the interval; another command, or an unknown one, opens at once.
func TestWindowsPerWorkload(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	s := New(10*time.Second, c.now)
	first := &probes{}
	s.Add(1, "llama-bench -m a", first)
	c.advance(time.Second)
	s.Filled(1) // closed at 1 s
	s.Remove(1)
	c.advance(2 * time.Second)
	again, other, unknown := &probes{}, &probes{}, &probes{}
	if s.Add(2, "llama-bench -m a", again) || again.opened != 0 {
		t.Fatalf("a run of the same command opened its window 2 s after the last one closed")
	}
	if !s.Add(3, "llama-bench -m b", other) || !s.Add(4, "", unknown) {
		t.Fatalf("another command's first window, or an unknown one's, did not open at once")
	}
	if next := s.Tick(); next != c.at(11*time.Second) {
		t.Errorf("next window at %v, want the interval after the last close, 11s", next)
	}
	c.advance(8 * time.Second)
	if s.Tick(); again.opened != 1 {
		t.Errorf("the run's window did not open an interval after the last: opened %d", again.opened)
	}
	// Long past every window, the same command opens at once again.
	s.Remove(2)
	c.advance(time.Hour)
	if !s.Add(5, "llama-bench -m a", &probes{}) {
		t.Errorf("a run an hour later waited")
	}
}

// A graph of a phase no window traced brings the next window forward, a few times at
// most; one a window traced does not. A workload run again keeps what its windows traced.
func TestPhasesFirst(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	s := New(10*time.Second, c.now)
	prefill, decode := Phase{Name: "prefill"}, Phase{Name: "decode"}
	a := &probes{}
	s.Add(1, "server", a)
	if s.Untraced(1, decode) {
		t.Error("brought forward while a window is open")
	}
	s.Traced(1, prefill) // the first window traced a prefill
	s.Filled(1)
	c.advance(time.Second)
	if s.Untraced(1, prefill) {
		t.Error("brought forward for a phase traced already")
	}
	if next := s.NextOf(1); next != c.at(10*time.Second) {
		t.Errorf("next window of pid 1 at %v, want the interval after the first", next)
	}
	if !s.Untraced(1, decode) || s.NextOf(1) != c.now() {
		t.Fatalf("a decode no window traced did not bring the window forward: next %v", s.NextOf(1))
	}
	if s.Tick(); a.opened != 2 || a.catchUps != 1 || !s.NextOf(1).IsZero() {
		t.Fatalf("the window brought forward did not open as a catch-up: %+v", a)
	}
	// That window traced another prefill: the decode asks again, up to catchUps times.
	for i := 2; i <= catchUps+1; i++ {
		s.Traced(1, prefill)
		s.Filled(1)
		c.advance(time.Second)
		if got := s.Untraced(1, decode); got != (i <= catchUps) {
			t.Fatalf("catch-up %d: %v", i, got)
		}
		s.Tick()
	}
	if a.opened != catchUps+1 || a.catchUps != catchUps {
		t.Errorf("%d windows opened, %d as catch-ups; want the first and %d catch-ups", a.opened, a.catchUps, catchUps)
	}
	// The next, due by the interval, is no catch-up.
	c.advance(10 * time.Second)
	if s.Tick(); a.opened != catchUps+2 || a.catchUps != catchUps {
		t.Errorf("the window due by the interval: %+v, want opened, no catch-up", a)
	}
	// The same workload again while the first runs: its phases are known.
	s.Traced(1, decode)
	s.Add(2, "server", &probes{})
	if s.Untraced(2, decode) {
		t.Error("a second process of a workload whose decode was traced brought a window forward")
	}
	if s.Untraced(3, decode) || !s.NextOf(3).IsZero() {
		t.Error("an unscheduled process")
	}
}
