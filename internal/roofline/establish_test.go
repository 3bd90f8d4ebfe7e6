package roofline

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const here = "probe v2; Test CPU; 2 CPUs; machine-id 0123"

var (
	t0   = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	t1   = t0.Add(time.Hour)
	fast = measurement{Peaks: Peaks{FLOPS: 230e9, Int8: 600e9, BF16: 460e9, Bandwidth: 45e9, Levels: levels(800e9, 300e9, 150e9)}, trials: 30, share: 0.97}
)

// levels are a 2-core machine's caches at these bandwidths.
func levels(l1, l2, l3 float64) []Level {
	return []Level{{"L1", 64 << 10, l1}, {"L2", 2 << 20, l2}, {"L3", 32 << 20, l3}}
}

func eq(a, b Peaks) bool { return reflect.DeepEqual(a, b) }

// stat is /proc/stat's first line after a window in which busy of every 100 ticks went
// to work, all CPUs together.
func stat(busy uint64) func() ([]byte, error) {
	n := uint64(0)
	return func() ([]byte, error) {
		n++
		// user nice system idle iowait irq softirq steal guest guest_nice
		return fmt.Appendf(nil, "cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", n*busy, n*(100-busy)), nil
	}
}

// fake is an establisher with a given load and probe result; measured counts the probes.
type fake struct {
	busy     uint64
	m        measurement
	measured int
	at       time.Time
}

func (f *fake) establish(t *testing.T, cfg EstablishConfig) (Roofs, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	e := establisher{
		readStat: stat(f.busy),
		sleep:    func(time.Duration) {},
		measure:  func(time.Duration) measurement { f.measured++; return f.m },
		machine:  func() string { return here },
		now:      func() time.Time { return f.at },
	}
	return e.establish(cfg, zap.New(core)), logs
}

func TestRoofsStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "roofline.json")
	want := state{Machine: here, Revision: probeRevision, FLOPS: 1.5e11, Int8: 4e11, Bandwidth: 4.2e10, Levels: levels(1e12, 5e11, 2e11), At: t0, Trials: 17, Provisional: true}
	if err := save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := load(path, here)
	if err != nil || got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("load = %+v, %v; want %+v", got, err, want)
	}
	if s, err := load(filepath.Join(t.TempDir(), "none.json"), here); s != nil || err != nil {
		t.Errorf("missing file: %+v, %v", s, err)
	}
}

// A file copied from another machine, or written by an older probe, is ignored with a
// warning that says so, and the roofs are measured afresh and kept over it.
func TestRoofsForeignStateIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roofline.json")
	other := "probe v2; Other CPU; 64 CPUs; machine-id 9999"
	if err := save(path, state{Machine: other, FLOPS: 9e12, Bandwidth: 4e11, At: t0}); err != nil {
		t.Fatal(err)
	}
	_, err := load(path, here)
	want := `roofline state file ` + path + ` is for "` + other + `", not this machine ("` + here + `")`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	f := &fake{m: fast, at: t1}
	r, logs := f.establish(t, EstablishConfig{Probe: time.Second, StateFile: path})
	if !eq(r.Peaks, fast.Peaks) || r.Source != SourceMeasured || f.measured != 1 {
		t.Errorf("roofs %+v after %d probes", r, f.measured)
	}
	if w := logs.FilterMessage("ignoring the roofline state file, measuring afresh").All(); len(w) != 1 ||
		w[0].ContextMap()["error"] != want {
		t.Errorf("warnings %+v", logs.All())
	}
	if s, err := load(path, here); err != nil || s.FLOPS != fast.FLOPS {
		t.Errorf("kept %+v, %v", s, err)
	}
}

func TestRoofsCorruptStateIgnored(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]struct{ body, err string }{
		"truncated": {`{"machine": "` + here + `", "peak_fl`,
			"roofline state file %s is corrupt: unexpected end of JSON input"},
		"zero": {`{"machine": "` + here + `", "peak_flops": 0, "peak_bandwidth": 1e10}`,
			"roofline state file %s is corrupt: peaks 0 FLOP/s and 1e+10 B/s"},
	} {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(content.body), 0o644); err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(content.err, "%s", path, 1)
		if _, err := load(path, here); err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %s", name, err, want)
		}
		f := &fake{busy: 90, m: fast, at: t1}
		r, logs := f.establish(t, EstablishConfig{Probe: time.Second, StateFile: path})
		if !eq(r.Peaks, fast.Peaks) || r.Source != SourceMeasuredBusy || !r.Provisional || logs.Len() != 1 {
			t.Errorf("%s: roofs %+v, logs %+v", name, r, logs.All())
		}
	}
}

func TestRoofsBestOf(t *testing.T) {
	var b bestOf
	for _, r := range []float64{40, 30, 44, 20, 41, 39, 42, 10, 35} {
		b.add(r)
		if b.settled() {
			t.Fatalf("settled after %d trials: %+v", b.n, b)
		}
	}
	if b.first != 44 || b.second != 42 {
		t.Fatalf("best two %+v", b)
	}
	b.add(43.5) // the tenth trial, within 2% of the best
	if !b.settled() || b.first != 44 || b.second != 43.5 {
		t.Errorf("not settled: %+v", b)
	}
	b.add(50) // a new best, far above the next
	if b.settled() {
		t.Errorf("settled on a lone best: %+v", b)
	}
}

func TestRoofsIdle(t *testing.T) {
	for busy, want := range map[uint64]bool{0: false, 5: false, 10: false, 11: true, 60: true, 100: true} {
		e := establisher{readStat: stat(busy), sleep: func(time.Duration) {}}
		if got, err := e.busy(); err != nil || got != want {
			t.Errorf("%d%% busy: busy = %v, %v", busy, got, err)
		}
	}
	e := establisher{readStat: func() ([]byte, error) { return []byte("intr 1 2 3\n"), nil }, sleep: func(time.Duration) {}}
	if _, err := e.busy(); err == nil || err.Error() != `/proc/stat: unexpected first line "intr 1 2 3"` {
		t.Errorf("err = %v", err)
	}
}

// The decisions over a machine's life, one state file throughout.
func TestRoofsEstablishAcrossStarts(t *testing.T) {
	cfg := EstablishConfig{Probe: time.Second, StateFile: filepath.Join(t.TempDir(), "roofline.json")}
	slow := measurement{Peaks: Peaks{FLOPS: 200e9, Int8: 500e9, BF16: 400e9, Bandwidth: 30e9, Levels: levels(700e9, 250e9, 100e9)}, trials: 80, share: 0.5}
	best := Peaks{FLOPS: 230e9, Int8: 650e9, BF16: 470e9, Bandwidth: 47e9, Levels: levels(800e9, 310e9, 150e9)}
	for i, c := range []struct {
		busy     uint64
		m        measurement
		want     Peaks
		source   string
		at       time.Time
		measured bool
	}{
		// The first start is beside a model: measured anyway, provisionally.
		{busy: 80, m: slow, want: slow.Peaks, source: SourceMeasuredBusy, at: t0, measured: true},
		// Busy again: the provisional roofs stand, unmeasured, so verdicts stay put.
		{busy: 80, m: fast, want: slow.Peaks, source: SourceStored, at: t0},
		// Idle: measured, and the idle measurement replaces the provisional one.
		{busy: 2, m: fast, want: fast.Peaks, source: SourceMeasured, at: t1, measured: true},
		// Idle but the probe's threads were crowded out: a busy measurement, ignored.
		{busy: 2, m: measurement{Peaks: Peaks{FLOPS: 300e9, Int8: 900e9, BF16: 900e9, Bandwidth: 60e9, Levels: levels(9e11, 9e11, 9e11)}, share: 0.5},
			want: fast.Peaks, source: SourceStored, at: t1, measured: true},
		// Idle and slower: the better kept roofs stand.
		{busy: 2, m: slow, want: fast.Peaks, source: SourceStored, at: t1, measured: true},
		// Idle and faster on one roof: each roof keeps its best.
		{busy: 2, m: measurement{Peaks: Peaks{FLOPS: 220e9, Int8: 650e9, BF16: 470e9, Bandwidth: 47e9, Levels: levels(790e9, 310e9, 140e9)}, trials: 12, share: 0.95},
			want: best, source: SourceMeasured, at: t1.Add(2 * time.Hour), measured: true},
		// Busy: stored, not measured.
		{busy: 80, m: fast, want: best, source: SourceStored, at: t1.Add(2 * time.Hour)},
	} {
		f := &fake{busy: c.busy, m: c.m, at: c.at}
		if c.source == SourceStored && !c.measured {
			f.at = time.Time{} // stored roofs keep their own time
		}
		r, logs := f.establish(t, cfg)
		if !eq(r.Peaks, c.want) || r.Source != c.source || !r.At.Equal(c.at) || (f.measured == 1) != c.measured || logs.Len() != 0 {
			t.Errorf("start %d: roofs %+v after %d probes, logs %v; want %+v, %s at %s", i, r, f.measured, logs.All(), c.want, c.source, c.at)
		}
	}
}

func TestRoofsConfigured(t *testing.T) {
	f := &fake{at: t0}
	r, _ := f.establish(t, EstablishConfig{Peaks: peak, StateFile: filepath.Join(t.TempDir(), "roofline.json")})
	if !eq(r.Peaks, peak) || r.Source != SourceConfigured || f.measured != 0 {
		t.Errorf("roofs %+v after %d probes", r, f.measured)
	}
	// One roof configured: the other is measured, the configured one wins.
	f = &fake{m: fast, at: t0}
	r, _ = f.establish(t, EstablishConfig{Peaks: Peaks{Bandwidth: 20e9}})
	if !eq(r.Peaks, Peaks{FLOPS: fast.FLOPS, Int8: fast.Int8, BF16: fast.BF16, Bandwidth: 20e9, Levels: fast.Levels}) || r.Source != SourceMeasured {
		t.Errorf("roofs %+v", r)
	}
}

// An unwritable state file is a warning; the measured roofs still hold.
func TestRoofsUnwritableState(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fake{m: fast, at: t0}
	r, logs := f.establish(t, EstablishConfig{Probe: time.Second, StateFile: filepath.Join(blocker, "roofline.json")})
	if !eq(r.Peaks, fast.Peaks) || logs.FilterMessage("cannot keep the roofs across restarts").Len() != 1 {
		t.Errorf("roofs %+v, logs %v", r, logs.All())
	}
}

// A state file of the probe before the int8, bf16 and cache roofs is kept: its roofs
// stand where better, and the first start measures (memory's too, which the older probe
// read as one stream, slower), even beside a model (provisionally, so that the next idle
// start makes them final).
func TestRoofsOlderStateFileKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roofline.json")
	old := `{"machine": "` + here + `", "peak_flops": 2.4e11, "peak_bandwidth": 5e10,
  "measured_at": "2025-06-01T12:00:00Z", "trials": 20, "provisional": false}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := load(path, here)
	if err != nil || s.complete() || s.FLOPS != 2.4e11 || s.Bandwidth != 5e10 {
		t.Fatalf("older file: %+v, %v", s, err)
	}
	cfg := EstablishConfig{Probe: time.Second, StateFile: path}
	f := &fake{busy: 80, m: fast, at: t1}
	r, logs := f.establish(t, cfg)
	want := Peaks{FLOPS: 2.4e11, Int8: fast.Int8, BF16: fast.BF16, Bandwidth: 5e10, Levels: fast.Levels}
	if !eq(r.Peaks, want) || f.measured != 1 || !r.Provisional || r.Source != SourceMeasuredBusy || logs.Len() != 0 {
		t.Fatalf("busy start on an older file: %+v after %d probes, logs %v", r, f.measured, logs.All())
	}
	f = &fake{busy: 80, m: fast, at: t1}
	if r, _ := f.establish(t, cfg); !eq(r.Peaks, want) || f.measured != 0 || r.Source != SourceStored {
		t.Errorf("the next busy start: %+v after %d probes", r, f.measured)
	}
	f = &fake{busy: 2, m: fast, at: t1}
	if r, _ := f.establish(t, cfg); !eq(r.Peaks, want) || r.Provisional || r.Source != SourceMeasured {
		t.Errorf("the next idle start: %+v", r)
	}
}

// With KeepFinal, final roofs kept stand on idle CPUs too, without a probe or the idle
// check; provisional ones, or none, are measured as without it.
func TestRoofsKeepFinal(t *testing.T) {
	dir := t.TempDir()
	slow := fast
	slow.Peaks = Peaks{FLOPS: 100e9, Int8: 300e9, BF16: 200e9, Bandwidth: 20e9, Levels: levels(400e9, 150e9, 70e9)}
	for _, c := range []struct {
		name        string
		kept        *state
		wantSource  string
		wantProbes  int
		wantTheKept bool
	}{
		{"final", &state{Machine: here, Revision: probeRevision, At: t0, Trials: 30}, SourceStored, 0, true},
		{"provisional", &state{Machine: here, Revision: probeRevision, At: t0, Trials: 30, Provisional: true}, SourceMeasured, 1, false},
		{"none", nil, SourceMeasured, 1, false},
	} {
		path := filepath.Join(dir, c.name+".json")
		if c.kept != nil {
			c.kept.setPeaks(slow.Peaks)
			if err := save(path, *c.kept); err != nil {
				t.Fatal(err)
			}
		}
		f := &fake{m: fast, at: t1}
		checked := 0
		e := establisher{
			readStat: func() ([]byte, error) { checked++; return stat(0)() },
			sleep:    func(time.Duration) {},
			measure:  func(time.Duration) measurement { f.measured++; return f.m },
			machine:  func() string { return here },
			now:      func() time.Time { return f.at },
		}
		r := e.establish(EstablishConfig{Probe: time.Second, StateFile: path, KeepFinal: true}, zap.NewNop())
		want := fast.Peaks
		if c.wantTheKept {
			want = slow.Peaks
		}
		if r.Source != c.wantSource || f.measured != c.wantProbes || !eq(r.Peaks, want) || c.wantTheKept && checked > 0 {
			t.Errorf("%s: roofs %+v from %s after %d probes and %d reads of /proc/stat; want %s after %d probes",
				c.name, r.Peaks, r.Source, f.measured, checked, c.wantSource, c.wantProbes)
		}
	}
}
