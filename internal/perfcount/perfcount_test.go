package perfcount

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	for name, want := range map[string]Counter{
		"task-clock": {Name: "task-clock", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK},
		"cycles":     {Name: "cycles", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES},
		"r01c2":      {Name: "r01c2", Type: unix.PERF_TYPE_RAW, Config: 0x1c2},
	} {
		got, err := Parse(name)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", name, got, err, want)
		}
	}
	if c, _ := Parse("task-clock"); c.Hardware() || c.Key() != "task_clock" {
		t.Errorf("task-clock: hardware %v, key %q", c.Hardware(), c.Key())
	}
	for _, bad := range []string{"cycels", "r", "rxyz", ""} {
		_, err := Parse(bad)
		if err == nil || !strings.HasPrefix(err.Error(), "unknown perf counter \""+bad+"\": want one of alignment-faults, ") {
			t.Errorf("Parse(%q): %v", bad, err)
		}
	}
}

// ProfInfer's ARM PMU events are known by name on arm64, as raw PMUv3 event numbers, and
// refused elsewhere, where those numbers mean other events; the names an unknown counter's
// error lists are the machine's.
func TestParseARMEvents(t *testing.T) {
	for name, code := range map[string]uint64{"l1d_cache_refill": 0x03, "l2d_cache_refill": 0x17, "ll_cache_miss_rd": 0x37, "stall_backend": 0x24} {
		if c, err := parse(name, "arm64"); err != nil || c != (Counter{Name: name, Type: unix.PERF_TYPE_RAW, Config: code}) || !c.Hardware() {
			t.Errorf("arm64: parse(%q) = %+v, %v", name, c, err)
		}
		want := "perf counter \"" + name + "\" is an ARM PMU event, and this machine is amd64"
		if _, err := parse(name, "amd64"); err == nil || err.Error() != want {
			t.Errorf("amd64: parse(%q): %v, want %q", name, err, want)
		}
	}
	if _, err := parse("cycels", "arm64"); err == nil || !strings.Contains(err.Error(), "l1d_cache_refill") {
		t.Errorf("arm64's unknown counter error lists no ARM event: %v", err)
	}
	if _, err := parse("cycels", "amd64"); err == nil || strings.Contains(err.Error(), "l1d_cache_refill") {
		t.Errorf("amd64's unknown counter error lists ARM events: %v", err)
	}
}

// On arm64 the verdict's last-level misses are LL_CACHE_MISS_RD: cache-misses there
// counts L1D refills.
func TestClassifyARM64(t *testing.T) {
	var cs []Counter
	for _, n := range []string{"cycles", "instructions", "cache-misses"} {
		c, _ := parse(n, "arm64")
		cs = append(cs, c)
	}
	if _, ok := newClassifier(cs, "arm64"); ok {
		t.Error("arm64 classifier built on cache-misses")
	}
	c, _ := parse("ll_cache_miss_rd", "arm64")
	cl, ok := newClassifier(append(cs, c), "arm64")
	if !ok {
		t.Fatal("arm64 classifier not built on ll_cache_miss_rd")
	}
	if b, _, mpki, _ := cl.Classify([]uint64{2000, 1000, 900, 30}); b != Memory || mpki != 30 {
		t.Errorf("30 LLC misses per thousand instructions: %q, %v MPKI", b, mpki)
	}
}

func TestClassify(t *testing.T) {
	cs := make([]Counter, 3)
	for i, n := range []string{"instructions", "cache-misses", "cycles"} {
		cs[i], _ = Parse(n)
	}
	c, ok := NewClassifier(cs)
	if !ok {
		t.Fatal("classifier not built from cycles, instructions and cache-misses")
	}
	for _, tc := range []struct {
		instr, misses, cycles uint64
		want                  Bound
	}{
		{1000, 30, 2000, Memory}, // 30 MPKI
		{3000, 1, 1000, Compute}, // IPC 3, 0.3 MPKI
		{1000, 2, 2000, Mixed},   // IPC 0.5, 2 MPKI
		{1000, 0, 2000, Mixed},   // no misses, but stalled
	} {
		b, _, _, ok := c.Classify([]uint64{tc.instr, tc.misses, tc.cycles})
		if !ok || b != tc.want {
			t.Errorf("%+v: %q, %v", tc, b, ok)
		}
	}
	if _, _, _, ok := c.Classify([]uint64{0, 0, 0}); ok {
		t.Error("classified a node with no instructions")
	}
	if _, ok := NewClassifier(cs[:2]); ok {
		t.Error("classifier built without cycles")
	}
}

// fakeTable records what Threads publishes.
type fakeTable struct {
	events map[uint32]int
	slots  map[uint32]uint32
}

func (f *fakeTable) PutEvent(i uint32, fd int) error { f.events[i] = fd; return nil }
func (f *fakeTable) DeleteEvent(i uint32) error      { delete(f.events, i); return nil }
func (f *fakeTable) PutSlot(tid, s uint32) error     { f.slots[tid] = s; return nil }
func (f *fakeTable) DeleteSlot(tid uint32) error     { delete(f.slots, tid); return nil }

// Software counters open on a thread of this process with no privileges beyond what the
// test runs with when perf_event_paranoid allows counting one's own threads.
func TestThreads(t *testing.T) {
	var cs []Counter
	for _, n := range []string{"task-clock", "context-switches"} {
		c, _ := Parse(n)
		cs = append(cs, c)
	}
	ok, missing := Detect(cs)
	if len(ok) != 2 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("software counters unavailable: %v", missing)
		}
		t.Skipf("software counters unavailable here: %v", missing)
	}
	tab := &fakeTable{events: map[uint32]int{}, slots: map[uint32]uint32{}}
	th, err := NewThreads(ok, tab)
	if err != nil {
		t.Fatal(err)
	}
	pid, tid := uint32(os.Getpid()), uint32(unix.Gettid())
	if err := th.Open(pid, tid); err != nil {
		t.Fatal(err)
	}
	s, in := tab.slots[tid]
	if !in || len(tab.events) != 2 || tab.events[s*PerThread] <= 0 || tab.events[s*PerThread+1] <= 0 || !th.Has(tid) {
		t.Fatalf("published slots %v, events %v", tab.slots, tab.events)
	}
	// A thread started with a tid whose counters are still open gets its own, in the
	// slot the earlier thread's freed.
	if err := th.Started(pid, tid); err != nil {
		t.Fatal(err)
	}
	if s2 := tab.slots[tid]; len(tab.events) != 2 || tab.events[s2*PerThread] <= 0 || len(th.free) != Slots-1 || !th.Has(tid) {
		t.Fatalf("after Started: slots %v, events %v, %d free", tab.slots, tab.events, len(th.free))
	}
	if err := th.Sweep(func(uint32, uint32) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if len(tab.slots) != 0 || len(tab.events) != 0 || th.Has(tid) || len(th.free) != Slots {
		t.Fatalf("after sweep: slots %v, events %v, %d free", tab.slots, tab.events, len(th.free))
	}
	// Every slot taken: the caller learns it can free some.
	th.free = nil
	if err := th.Open(pid, tid); !errors.Is(err, ErrFull) {
		t.Errorf("Open with every slot taken: %v", err)
	}
	if _, err := NewThreads(make([]Counter, PerThread+1), tab); err == nil ||
		err.Error() != "9 perf counters configured, at most 8 fit a record" {
		t.Errorf("too many counters: %v", err)
	}
}

// A counter that does not open is blamed on the right cause: a PMU without the event is not
// a machine without a PMU.
func TestReason(t *testing.T) {
	hw, _ := Parse("instructions")
	sw, _ := Parse("task-clock")
	for _, tc := range []struct {
		c    Counter
		err  error
		pmu  bool
		want string
	}{
		{hw, unix.ENOENT, true, "this machine's PMU does not count this event: no such file or directory"},
		{hw, unix.ENOENT, false, "no hardware PMU exposed to this machine: no such file or directory"},
		{sw, unix.EOPNOTSUPP, true, "not supported by this kernel: operation not supported"},
		{hw, unix.EACCES, true, "not permitted: needs root or CAP_PERFMON: permission denied"},
		{hw, unix.EINVAL, false, "invalid argument"},
	} {
		if got := reason(tc.c, tc.err, tc.pmu); got != tc.want {
			t.Errorf("reason(%s, %v, pmu %v) = %q, want %q", tc.c.Name, tc.err, tc.pmu, got, tc.want)
		}
	}
}
