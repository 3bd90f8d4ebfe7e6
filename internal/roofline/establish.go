package roofline

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Where roofs come from.
const (
	SourceConfigured   = "configured"      // both peaks set in the configuration
	SourceMeasured     = "measured"        // by this start's probe, on idle CPUs
	SourceStored       = "stored"          // from the state file: the CPUs were busy, or its best stood
	SourceMeasuredBusy = "measured (busy)" // by this start's probe beside other work, none kept
)

// Roofs are the peaks nodes are classified under, and how and when they were obtained.
type Roofs struct {
	Peaks
	Source      string
	At          time.Time // when they were measured, or configured
	Trials      int       // timed probe trials behind them; 0 when configured
	Provisional bool      // measured beside other work; the next idle start replaces them
}

// The defaults of where roofs are kept and how long they take, the receiver's and the
// CLI's alike: a root collector keeps state where other daemons do.
const (
	DefaultStateFile = "/var/lib/profinfer/roofline.json"
	DefaultProbe     = 400 * time.Millisecond
)

// EstablishConfig says where the roofs come from.
type EstablishConfig struct {
	Peaks     Peaks         // configured; zero fields are measured
	Probe     time.Duration // the most a measurement takes
	StateFile string        // keeps the best measurement across restarts; "" keeps none
	KeepFinal bool          // final roofs kept stand as they are, not measured again
}

// Establish returns the roofs to classify under: the configured peaks, else the best
// measurement kept for this machine in the state file, re-measured only while the CPUs
// are idle (never, where they are final and cfg.KeepFinal says so). With none kept,
// it measures anyway, provisionally if the CPUs are busy, and the next idle start
// replaces that; until then busy starts reuse it, so that verdicts do not move with the
// load. Problems with the state file are warnings.
func Establish(cfg EstablishConfig, log *zap.Logger) Roofs {
	// The collector's start (the kernel's BTF decoded, the programs loaded) leaves
	// garbage whose collection would otherwise take the probe's CPUs from its threads.
	runtime.GC()
	return establisher{
		readStat: func() ([]byte, error) { return os.ReadFile("/proc/stat") },
		sleep:    time.Sleep,
		measure:  measure,
		machine:  machine,
		now:      time.Now,
	}.establish(cfg, log)
}

// Idleness: the CPUs are busy if more than busyAbove of their time, all together, went
// to anything but idle over idleWindow before the probe, or to anything but profinfer
// during it (the probe's share of the CPUs is then under minShare).
const (
	idleWindow = 200 * time.Millisecond
	busyAbove  = 0.1
	minShare   = 0.9
)

type establisher struct {
	readStat func() ([]byte, error)
	sleep    func(time.Duration)
	measure  func(time.Duration) measurement
	machine  func() string
	now      func() time.Time
}

func (e establisher) establish(cfg EstablishConfig, log *zap.Logger) Roofs {
	if cfg.Peaks.FLOPS > 0 && cfg.Peaks.Bandwidth > 0 {
		return Roofs{Peaks: cfg.Peaks, Source: SourceConfigured, At: e.now()}
	}
	key := e.machine()
	var kept *state
	if cfg.StateFile != "" {
		s, err := load(cfg.StateFile, key)
		if err != nil {
			log.Warn("ignoring the roofline state file, measuring afresh", zap.Error(err))
		}
		kept = s
	}
	if kept != nil && kept.complete() && !kept.Provisional && cfg.KeepFinal {
		return withPeaks(kept.roofs(SourceStored), cfg.Peaks)
	}
	busy, err := e.busy()
	if err != nil {
		log.Warn("cannot tell whether the CPUs are idle, measuring anyway", zap.Error(err))
	}
	var r Roofs
	if kept != nil && busy && kept.complete() {
		r = kept.roofs(SourceStored)
	} else {
		m := e.measure(cfg.Probe)
		s, changed := merge(kept, m, busy || m.share < minShare, key, e.now())
		r = s.roofs(SourceMeasured)
		switch {
		case !changed:
			r.Source = SourceStored
		case s.Provisional:
			r.Source = SourceMeasuredBusy
		}
		if cfg.StateFile != "" && changed {
			if err := save(cfg.StateFile, s); err != nil {
				log.Warn("cannot keep the roofs across restarts", zap.Error(err))
			}
		}
	}
	return withPeaks(r, cfg.Peaks)
}

// withPeaks is r with the peaks the configuration gives instead of its own.
func withPeaks(r Roofs, p Peaks) Roofs {
	r.FLOPS = cmp.Or(p.FLOPS, r.FLOPS)
	r.Bandwidth = cmp.Or(p.Bandwidth, r.Bandwidth)
	return r
}

// merge folds measurement m into what was kept. An idle measurement makes the roofs
// final and a busy one never changes final ones, except to add the roofs that a file of
// an older probe lacks, provisionally; each roof keeps the better of the two, because
// noise only ever slows a probe down. changed is false when what was kept stands.
func merge(kept *state, m measurement, busy bool, key string, at time.Time) (s state, changed bool) {
	s = state{Machine: key, At: at, Trials: m.trials, Provisional: busy}
	s.setPeaks(m.Peaks)
	switch {
	case kept == nil:
		return s, true
	case kept.Provisional && !busy:
		// Idle roofs are no longer provisional; a busy probe that came out faster still
		// shows what the machine can do.
	case !kept.Provisional && busy && kept.complete():
		return *kept, false
	case !kept.Provisional && busy:
	case !m.Peaks.rose(kept.peaks()):
		return *kept, false
	}
	s.setPeaks(m.Peaks.higher(kept.peaks()))
	return s, true
}

// higher is the better of each of p's and o's roofs. Cache levels are matched by name
// and size; where they differ (another cache layout), p's stand.
func (p Peaks) higher(o Peaks) Peaks {
	h := Peaks{FLOPS: max(p.FLOPS, o.FLOPS), Int8: max(p.Int8, o.Int8), BF16: max(p.BF16, o.BF16),
		Bandwidth: max(p.Bandwidth, o.Bandwidth), Levels: slices.Clone(p.Levels)}
	if !sameLevels(p.Levels, o.Levels) {
		return h
	}
	for i := range h.Levels {
		h.Levels[i].Bandwidth = max(h.Levels[i].Bandwidth, o.Levels[i].Bandwidth)
	}
	return h
}

// rose is true when any of p's roofs is above o's, or p has cache levels o lacks.
func (p Peaks) rose(o Peaks) bool {
	if p.FLOPS > o.FLOPS || p.Int8 > o.Int8 || p.BF16 > o.BF16 || p.Bandwidth > o.Bandwidth || !sameLevels(p.Levels, o.Levels) {
		return true
	}
	for i, l := range p.Levels {
		if l.Bandwidth > o.Levels[i].Bandwidth {
			return true
		}
	}
	return false
}

func sameLevels(a, b []Level) bool {
	return slices.EqualFunc(a, b, func(x, y Level) bool { return x.Name == y.Name && x.Size == y.Size })
}

// busy samples /proc/stat over idleWindow.
func (e establisher) busy() (bool, error) {
	a, err := e.cpuTimes()
	if err != nil {
		return false, err
	}
	e.sleep(idleWindow)
	b, err := e.cpuTimes()
	if err != nil {
		return false, err
	}
	total := b.total - a.total
	return total > 0 && float64(b.busy-a.busy) > busyAbove*float64(total), nil
}

// cpuTimes are the ticks of all CPUs together, from the "cpu" line of /proc/stat.
type cpuTimes struct{ busy, total uint64 }

func (e establisher) cpuTimes() (cpuTimes, error) {
	b, err := e.readStat()
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPUTimes(b)
}

// parseCPUTimes reads the "cpu" line of /proc/stat, in ticks.
func parseCPUTimes(b []byte) (cpuTimes, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	// user nice system idle iowait irq softirq steal (guest time is inside user).
	var t cpuTimes
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		t.total += v
		if i != 3 && i != 4 { // idle and iowait
			t.busy += v
		}
	}
	return t, nil
}

// stateVersion changes whenever the probe measures a roof differently, which makes
// earlier state files foreign: version 1 copied buffers, version 2 reads them. Within
// version 2, probeRevision 1 added the int8, bf16 and cache roofs and reads memory as
// four streams, faster than the one of earlier files: theirs are kept, and the next
// start measures again, each roof keeping the better of the two. probeRevision 2 added
// the working-set ladder where sysfs lists no caches.
const (
	stateVersion  = 2
	probeRevision = 2
)

// state is what the state file keeps: the best roofs measured on one machine.
type state struct {
	Machine     string    `json:"machine"`
	Revision    int       `json:"revision,omitempty"` // probeRevision; absent in older files
	FLOPS       float64   `json:"peak_flops"`
	Int8        float64   `json:"peak_int8,omitempty"`
	BF16        float64   `json:"peak_bf16,omitempty"`
	Bandwidth   float64   `json:"peak_bandwidth"`
	Levels      []Level   `json:"levels,omitempty"`
	At          time.Time `json:"measured_at"`
	Trials      int       `json:"trials"`
	Provisional bool      `json:"provisional"`
}

func (s state) peaks() Peaks {
	return Peaks{FLOPS: s.FLOPS, Int8: s.Int8, BF16: s.BF16, Bandwidth: s.Bandwidth, Levels: s.Levels}
}

func (s *state) setPeaks(p Peaks) {
	s.Revision = probeRevision
	s.FLOPS, s.Int8, s.BF16, s.Bandwidth, s.Levels = p.FLOPS, p.Int8, p.BF16, p.Bandwidth, p.Levels
}

// complete is true when s has every roof this probe measures.
func (s state) complete() bool { return s.Revision >= probeRevision }

func (s state) roofs(source string) Roofs {
	return Roofs{Peaks: s.peaks(), Source: source, At: s.At, Trials: s.Trials, Provisional: s.Provisional}
}

// machine identifies this machine, as the probe sees it, for the state file: a copy of
// the file from another machine, or after its CPUs changed, is not used.
func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	id := "unknown"
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
			id = string(bytes.TrimSpace(b))
			break
		}
	}
	return fmt.Sprintf("probe v%d; %s; %d CPUs; machine-id %s", stateVersion, model, len(allowedCPUs()), id)
}

// load reads the state file kept for machine key: nil and no error when there is none
// yet, nil and an error when it is unreadable, corrupt or another machine's.
func load(path, key string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("roofline state file %s is corrupt: %w", path, err)
	}
	if s.Machine != key {
		return nil, fmt.Errorf("roofline state file %s is for %q, not this machine (%q)", path, s.Machine, key)
	}
	if !(s.FLOPS > 0 && s.Bandwidth > 0) || math.IsInf(s.FLOPS, 0) || math.IsInf(s.Bandwidth, 0) || math.IsInf(s.Int8, 0) || math.IsInf(s.BF16, 0) {
		return nil, fmt.Errorf("roofline state file %s is corrupt: peaks %g FLOP/s and %g B/s", path, s.FLOPS, s.Bandwidth)
	}
	for _, l := range s.Levels {
		if !(l.Size > 0 && l.Bandwidth > 0) || math.IsInf(l.Bandwidth, 0) {
			return nil, fmt.Errorf("roofline state file %s is corrupt: cache level %+v", path, l)
		}
	}
	return &s, nil
}

// save replaces the state file in one rename, so that a crash leaves the old one or the
// new one, never half of either.
func save(path string, s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
