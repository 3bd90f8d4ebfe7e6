package registry

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/watch"
)

// fakeProc is a /proc tree of a few processes, each with a stat (for its virtual size),
// an exe link and no mappings.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc { return &fakeProc{t, t.TempDir()} }

// add makes process pid, running exe, with virtual size vsize.
func (f *fakeProc) add(pid int, exe string, vsize uint64) {
	dir := filepath.Join(f.root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, "exe"))
	if err := os.Symlink(exe, filepath.Join(dir, "exe")); err != nil {
		f.t.Fatal(err)
	}
	f.grow(pid, vsize)
	if err := os.WriteFile(filepath.Join(dir, "maps"), nil, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// grow sets process pid's virtual size, as a library mapped would.
func (f *fakeProc) grow(pid int, vsize uint64) {
	// pid (comm) state, then 19 fields before vsize, and the rest.
	fields := append([]string{strconv.Itoa(pid), "(fake)", "S"}, slices.Repeat([]string{"0"}, 19)...)
	fields = append(fields, strconv.FormatUint(vsize, 10))
	fields = append(fields, slices.Repeat([]string{"0"}, 29)...)
	if err := os.WriteFile(filepath.Join(f.root, strconv.Itoa(pid), "stat"), []byte(strings.Join(fields, " ")+"\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeProc) remove(pid int) {
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
		f.t.Fatal(err)
	}
}

// tracer records what the registry has it do.
type tracer struct {
	traced  map[int]bool
	retired []string
	refuse  map[int]error // Trace's answer for a process; nil: traced
	scans   int
}

func (t *tracer) Trace(f *Found) error {
	if err := t.refuse[f.Proc.PID]; err != nil {
		return err
	}
	t.traced[f.Proc.PID] = true
	return nil
}
func (t *tracer) Extend(*discover.Process, *ggml.Context) {}
func (t *tracer) Retire(pid int, why string, _ *watch.Exit) {
	if t.traced[pid] {
		delete(t.traced, pid)
		t.retired = append(t.retired, fmt.Sprintf("%d: %s", pid, why))
	}
}
func (t *tracer) Traced() map[int]bool { return maps.Clone(t.traced) }
func (t *tracer) Scanned()             { t.scans++ }

// bench is a registry over a fake /proc whose inspection answers from kinds: "ggml" is a
// GGML process, "refused" one that cannot be profiled, anything else none. It counts
// inspections by PID, and runs on a clock the test moves.
type bench struct {
	*Registry
	proc      *fakeProc
	tracer    *tracer
	kinds     map[int]string
	inspected map[int]int
	gone      map[int]bool // unmapped GGML while traced
	clock     time.Time
	logs      *observer.ObservedLogs
}

func newBench(t *testing.T, cfg Config) *bench {
	b := &bench{proc: newFakeProc(t), tracer: &tracer{traced: map[int]bool{}, refuse: map[int]error{}},
		kinds: map[int]string{}, inspected: map[int]int{}, gone: map[int]bool{}, clock: time.Unix(1000, 0)}
	cfg.Root = b.proc.root
	core, logs := observer.New(zap.DebugLevel)
	b.logs = logs
	r, err := New(cfg, b.tracer, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return b.clock }
	r.inspect = func(pid int) (*Found, bool, error) {
		b.inspected[pid]++
		switch b.kinds[pid] {
		case "ggml":
			return &Found{Proc: &discover.Process{PID: pid, Exe: "/bin/llama-server"}}, true, nil
		case "refused":
			return nil, true, Refuse(metadata.AttributeProfinferAttachReasonUnsupportedLayout, "/bin/llama-old", errors.New("no layout fits"))
		}
		return nil, false, fmt.Errorf("pid %d is not a GGML process: it %w", pid, errNotGGML)
	}
	r.vanished = func(pid int) bool { return b.gone[pid] }
	b.Registry = r
	return b
}

func (b *bench) process(pid int, kind string) {
	b.proc.add(pid, "/bin/"+kind, 4096)
	b.kinds[pid] = kind
}

func (b *bench) warnings() int { return b.logs.FilterMessage("GGML process not profiled").Len() }

// A scan traces GGML processes, turns the others away, and looks at a process turned away
// again only once its mappings grew, and no sooner than recheck.
func TestScanRechecksOnlyGrownProcesses(t *testing.T) {
	b := newBench(t, Config{})
	b.process(10, "ggml")
	b.process(11, "node")
	b.process(12, "refused")
	if err := b.Scan(true); err != nil {
		t.Fatal(err)
	}
	if !b.tracer.traced[10] || len(b.tracer.traced) != 1 {
		t.Fatalf("traced %v, want 10 alone", b.tracer.traced)
	}
	if got := b.Failures()[metadata.AttributeProfinferAttachReasonUnsupportedLayout]; got != 1 || b.warnings() != 1 {
		t.Fatalf("refusal counted %d times, warned %d times; want once each", got, b.warnings())
	}

	b.clock = b.clock.Add(recheck / 2)
	_ = b.Scan(false)
	b.clock = b.clock.Add(2 * recheck)
	_ = b.Scan(false) // due, but nothing grew
	if b.inspected[11] != 1 || b.inspected[12] != 1 || b.inspected[10] != 1 {
		t.Fatalf("inspections %v, want one each", b.inspected)
	}

	// node-llama-cpp loads its backend with dlopen: the process grows and becomes GGML.
	b.proc.grow(11, 8192)
	b.kinds[11] = "ggml"
	b.proc.grow(12, 8192)
	b.clock = b.clock.Add(2 * recheck)
	_ = b.Scan(false)
	if !b.tracer.traced[11] {
		t.Fatal("a process that mapped GGML since was not traced")
	}
	if b.inspected[12] != 2 {
		t.Fatalf("grown refused process inspected %d times, want 2", b.inspected[12])
	}
	// Refused again: said and counted once only.
	if got := b.Failures()[metadata.AttributeProfinferAttachReasonUnsupportedLayout]; got != 1 || b.warnings() != 1 {
		t.Fatalf("refusal counted %d times, warned %d times after a recheck; want once each", got, b.warnings())
	}
	if b.tracer.scans != 4 {
		t.Fatalf("tracer told of %d scans, want 4", b.tracer.scans)
	}
}

// A traced process that is gone is retired at the next scan.
func TestScanRetiresExited(t *testing.T) {
	b := newBench(t, Config{})
	b.process(20, "ggml")
	_ = b.Scan(true)
	b.proc.remove(20)
	_ = b.Scan(false)
	if len(b.tracer.traced) != 0 || len(b.tracer.retired) != 1 || !strings.Contains(b.tracer.retired[0], "exited") {
		t.Fatalf("traced %v, retired %q", b.tracer.traced, b.tracer.retired)
	}
}

// A process named by PID that is not GGML is an error, returned from the first scan when
// errors propagate, and counted.
func TestNamedTargetNotGGML(t *testing.T) {
	for _, propagate := range []bool{true, false} {
		b := newBench(t, Config{Targets: []Selector{{PID: 30}}, Propagate: propagate})
		b.process(30, "python")
		b.process(31, "ggml") // not selected
		err := b.Scan(true)
		if propagate != (err != nil) || (err != nil && !errors.Is(err, errNotGGML)) {
			t.Fatalf("propagate %v: Scan returned %v", propagate, err)
		}
		if got := b.Failures()[metadata.AttributeProfinferAttachReasonOther]; got != 1 {
			t.Fatalf("propagate %v: counted %d, want 1", propagate, got)
		}
		if b.inspected[31] != 0 || len(b.tracer.traced) != 0 {
			t.Fatalf("an unselected process was looked at: %v", b.inspected)
		}
	}
}

// Targets by executable select only processes of that binary; a target whose binary is
// missing is an error that names it.
func TestSelectByExecutable(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "llama-server")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBench(t, Config{Targets: []Selector{{Executable: bin}}})
	b.proc.add(40, bin, 4096)
	b.kinds[40] = "ggml"
	b.process(41, "ggml")
	b.Notice([]int{41, 40, 40})
	if !b.tracer.traced[40] || b.inspected[41] != 0 || b.inspected[40] != 1 {
		t.Fatalf("traced %v, inspected %v; want 40 alone, once", b.tracer.traced, b.inspected)
	}

	missing := filepath.Join(dir, "llama-cli")
	_, err := New(Config{Root: b.proc.root, Targets: []Selector{{Executable: missing}}, Propagate: true}, b.tracer, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a missing target executable gave %v", err)
	}
}

// A process that cannot be traced because it unmapped GGML (or exited) while profinfer
// attached is no refusal: nothing is counted or said, and it is looked at again.
func TestVanishedIsNoRefusal(t *testing.T) {
	b := newBench(t, Config{})
	b.process(50, "ggml")
	b.tracer.refuse[50] = Refuse(metadata.AttributeProfinferAttachReasonProbes, "/bin/ggml", errors.New("uprobe: no such file"))
	b.gone[50] = true
	_ = b.Scan(true)
	if got := b.Failures(); got != ([metadata.AttributeProfinferAttachReasonOther + 1]uint64{}) || b.warnings() != 0 {
		t.Fatalf("a vanished process was counted %v and warned %d times", got, b.warnings())
	}
	if b.logs.FilterFieldKey("error").Filter(func(e observer.LoggedEntry) bool {
		return strings.Contains(fmt.Sprint(e.ContextMap()["error"]), errVanished.Error())
	}).Len() != 1 {
		t.Fatal("the vanished process's error does not say so")
	}
}
