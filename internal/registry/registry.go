// Package registry keeps the set of traced processes current. It lists processes from
// /proc and from the kernel hooks' notices, selects them by the configuration, inspects
// them, tells GGML processes from others and those profinfer cannot profile (aloud), and
// remembers the processes it turned away, so that each is looked at again only once its
// mappings grew. What places and removes probes is behind Tracer, so that the registry
// is tested without a kernel; all its work runs on the goroutine that calls Scan and
// Notice (or Watch), never on the reader's.
package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/prometheus/procfs"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/watch"
)

// Selector selects processes: by PID, or every process running Executable.
type Selector struct {
	PID        int
	Executable string
}

// Config is what the registry selects and reads.
type Config struct {
	Targets     []Selector // empty: every process that maps a GGML CPU backend
	Root        string     // where procfs is mounted: /proc
	Application bool       // find the llama_context's getters
	Propagate   bool       // return errors about targets from the first Scan
}

// Tracer places and removes the probes of the processes the registry finds.
type Tracer interface {
	// Trace puts probes on a GGML process found; an error is a *Refusal when the
	// process cannot be profiled.
	Trace(f *Found) error
	// Extend adds probes on the GGML objects a traced process mapped since it was traced
	// (a binding that loads libllama with dlopen after its backend).
	Extend(proc *discover.Process, ctx *ggml.Context)
	// Retire removes a traced process that exited or replaced its image; exit is how it
	// ended where the kernel's notice said, else nil.
	Retire(pid int, why string, exit *watch.Exit)
	// Traced is the set of traced processes.
	Traced() map[int]bool
	// Scanned follows each full scan of /proc: the tracer drops what it keeps for threads
	// that are gone.
	Scanned()
}

// recheck is how often a process that mapped no GGML is looked at again, if its mappings
// grew meanwhile: bindings such as node-llama-cpp load the backend with dlopen some time
// after they start.
const recheck = time.Second

// rejected is a process found not to be GGML (or not attachable): when it was looked at,
// its virtual size then, and whether it was refused as a GGML process (and said so).
type rejected struct {
	at      time.Time
	vsize   uint64
	refused bool
}

// Registry finds the processes to trace. Scan, Notice and the loops that call them run
// on one goroutine; Failures may be called from any.
type Registry struct {
	cfg    Config
	fs     procfs.FS
	tracer Tracer
	log    *zap.Logger
	self   int
	now    func() time.Time
	// inspect is inspectGGML, and vanished Vanished; tests replace them.
	inspect  func(pid int) (f *Found, mapped bool, err error)
	vanished func(pid int) bool

	// Files is the ELF cache, shared with the tracer's probes and backend resolvers.
	Files    *Files
	models   model.Cache
	rejected map[int]rejected
	// again are the processes found mapped but not yet relocated, to look at again soon,
	// and how often each was.
	again map[int]int

	mu       sync.Mutex // guards failures, which the metrics goroutine reads
	failures [metadata.AttributeProfinferAttachReasonOther + 1]uint64
}

// New returns a registry that has tracer trace the processes cfg selects. It resolves
// the targets' executables as /proc/PID/exe names them; one that cannot be is an error
// when errors propagate, else it is logged and left out.
func New(cfg Config, tracer Tracer, log *zap.Logger) (*Registry, error) {
	fs, err := procfs.NewFS(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("profinfer: opening %s: %w", cfg.Root, err)
	}
	r := &Registry{cfg: cfg, fs: fs, tracer: tracer, log: log, self: os.Getpid(), now: time.Now,
		Files: NewFiles(), rejected: map[int]rejected{}, again: map[int]int{}}
	r.inspect, r.vanished = r.inspectGGML, r.Vanished
	r.cfg.Targets = slices.Clone(cfg.Targets)
	for i, t := range r.cfg.Targets {
		if t.Executable == "" {
			continue
		}
		path, err := filepath.EvalSymlinks(t.Executable)
		if err != nil {
			if err := r.targetError(fmt.Errorf("profinfer: target executable %s: %w", t.Executable, err)); err != nil {
				return nil, err
			}
			continue
		}
		r.cfg.Targets[i].Executable = path
	}
	return r, nil
}

// FS is the procfs the registry reads.
func (r *Registry) FS() procfs.FS { return r.fs }

// Failures counts the processes not profiled, by reason.
func (r *Registry) Failures() [metadata.AttributeProfinferAttachReasonOther + 1]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures
}

func (r *Registry) count(reason metadata.AttributeProfinferAttachReason) {
	r.mu.Lock()
	r.failures[reason]++
	r.mu.Unlock()
}

// targetError counts and logs err, or returns it when errors propagate.
func (r *Registry) targetError(err error) error {
	reason := metadata.AttributeProfinferAttachReasonOther
	if rf := (*Refusal)(nil); errors.As(err, &rf) {
		reason = rf.Reason
	}
	r.count(reason)
	if r.cfg.Propagate {
		return err
	}
	r.log.Error("target skipped", zap.Error(err))
	return nil
}

// candidates returns the PIDs the configuration selects, and for each whether it was named
// explicitly (so that "not GGML" is an error rather than a skip).
func (r *Registry) candidates() (map[int]bool, error) {
	pids := map[int]bool{}
	if len(r.cfg.Targets) == 0 {
		all, err := discover.PIDs(r.fs, "")
		for _, pid := range all {
			pids[pid] = false
		}
		return pids, err
	}
	var errs []error
	for _, t := range r.cfg.Targets {
		if t.PID != 0 {
			pids[t.PID] = true
			continue
		}
		ps, err := discover.PIDs(r.fs, t.Executable)
		errs = append(errs, err)
		for _, pid := range ps {
			pids[pid] = false
		}
	}
	return pids, errors.Join(errs...)
}

// selects says whether the configuration selects process pid, and whether by its PID.
func (r *Registry) selects(pid int) (selected, named bool) {
	if pid == r.self {
		return false, false
	}
	if len(r.cfg.Targets) == 0 {
		return true, false
	}
	exe := ""
	for _, t := range r.cfg.Targets {
		if t.PID == pid {
			return true, true
		}
		if t.Executable == "" {
			continue
		}
		if exe == "" {
			proc, err := r.fs.Proc(pid)
			if err != nil {
				return false, false
			}
			if exe, err = discover.Executable(proc); err != nil {
				return false, false
			}
		}
		if exe == t.Executable {
			return true, false
		}
	}
	return false, false
}

// Scan scans /proc: it has the tracer trace new GGML processes and retire those that
// exited, and the ELF cache drop the files nobody asked for lately. On the first pass
// (at start) errors about targets are returned when they propagate.
func (r *Registry) Scan(first bool) error {
	pids, err := r.candidates()
	if err != nil {
		r.log.Debug("listing processes", zap.Error(err))
	}
	traced := r.tracer.Traced()
	for pid := range traced {
		if _, ok := pids[pid]; !ok || !r.alive(pid) {
			r.tracer.Retire(pid, retired[watch.Exited], nil)
		}
	}
	for pid := range r.rejected {
		if _, ok := pids[pid]; !ok {
			delete(r.rejected, pid)
		}
	}
	now := r.now()
	var todo []int
	for pid := range pids {
		if traced[pid] {
			continue
		}
		if rj, ok := r.rejected[pid]; ok {
			if now.Sub(rj.at) < recheck {
				continue
			}
			if v, err := discover.VSize(r.fs, pid); err != nil || v == rj.vsize {
				rj.at = now
				r.rejected[pid] = rj
				continue
			}
		}
		todo = append(todo, pid)
	}
	slices.Sort(todo)
	r.tracer.Scanned()
	r.Files.Sweep(now)
	return r.attachAll(pids, todo, first)
}

// Notice looks at the processes the kernel hooks noticed mapping code, those of them the
// configuration selects. A notice means new code, so processes rejected before are looked
// at again, and traced ones are extended.
func (r *Registry) Notice(noticed []int) {
	slices.Sort(noticed)
	traced := r.tracer.Traced()
	named := map[int]bool{}
	var todo []int
	for _, pid := range slices.Compact(noticed) {
		ok, isNamed := r.selects(pid)
		switch {
		case !ok:
		case traced[pid]:
			r.extend(pid)
		default:
			named[pid] = isNamed
			todo = append(todo, pid)
		}
	}
	_ = r.attachAll(named, todo, false)
}

// follow has the watcher hook the dynamic loaders of processes pids (nil: every
// candidate), so that what they load later is noticed however their root differs from
// profinfer's. A loader it cannot hook leaves that process to the scans of /proc.
func (r *Registry) follow(w *watch.Watcher, pids []int) {
	if pids == nil {
		all, _ := r.candidates()
		for pid := range all {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if err := w.Follow(filepath.Join(r.cfg.Root, strconv.Itoa(pid))); err != nil {
			r.log.Debug("not hooking a process's dynamic loader", zap.Int("pid", pid), zap.Error(err))
		}
	}
}

// extend has the tracer probe the GGML objects traced process pid mapped since.
func (r *Registry) extend(pid int) {
	proc, err := discover.Inspect(r.fs, r.cfg.Root, pid, r.Files.Classify)
	if err != nil || proc == nil {
		return
	}
	r.tracer.Extend(proc, r.contextFields(proc))
}

// attachAll attaches to the processes in todo; named says which of them the
// configuration names by PID, so that "not GGML" is an error rather than a skip. On the
// first pass errors are returned when they propagate.
func (r *Registry) attachAll(named map[int]bool, todo []int, first bool) error {
	now := r.now()
	for _, pid := range todo {
		vsize, _ := discover.VSize(r.fs, pid) // before: a dlopen during attach counts as a change
		err := r.attach(pid)
		if err == nil {
			delete(r.rejected, pid)
			delete(r.again, pid)
			continue
		}
		if errors.Is(err, ggml.ErrNotRelocated) && r.again[pid] < maxAgain {
			r.again[pid]++ // Watch looks again a moment later
			continue
		}
		delete(r.again, pid)
		var rf *Refusal
		refused := errors.As(err, &rf)
		prev, again := r.rejected[pid]
		r.rejected[pid] = rejected{at: now, vsize: vsize, refused: prev.refused || refused}
		if !named[pid] || again {
			// Found by discovery or by its executable, not named: most processes are not
			// GGML, and some (init, other namespaces' helpers) cannot even be read. A GGML
			// process that cannot be profiled is worth a word and a count, once.
			if refused && !prev.refused {
				r.count(rf.Reason)
				r.log.Warn("GGML process not profiled", zap.Int("pid", pid), zap.String("executable", rf.Exe),
					zap.String("reason", rf.Reason.String()), zap.Error(err))
			} else {
				r.log.Debug("process not attached", zap.Int("pid", pid), zap.Error(err))
			}
			continue
		}
		if err := r.targetError(err); err != nil && first {
			return err
		}
	}
	return nil
}

// attach inspects process pid and has the tracer trace it. A process that exits, or
// unmaps GGML, while profinfer reads it and places probes makes reads and attaches fail
// with errors that say nothing of the cause; once it is seen gone, that is what the
// error says, and it is no refusal: nothing was refused, and a process that maps GGML
// again is looked at again.
func (r *Registry) attach(pid int) error {
	f, mapped, err := r.inspect(pid)
	if err == nil {
		err = r.tracer.Trace(f)
	}
	var rf *Refusal
	if errors.As(err, &rf) && (mapped || f != nil) && r.vanished(pid) {
		return fmt.Errorf("pid %d exited or unmapped GGML while profinfer attached: %w", pid, errVanished)
	}
	return err
}

// maxAgain bounds the looks again at a process whose GGML is mapped but not relocated:
// some tens of milliseconds apart, a second or two in all, more than any loader takes.
const maxAgain = 40

// alive says whether process pid exists.
func (r *Registry) alive(pid int) bool {
	_, err := os.Stat(r.proc(pid))
	return err == nil
}

// retired says why a notice retires a traced process.
var retired = map[watch.Kind]string{
	watch.Exited: "target exited; probes detached",
	watch.Execed: "target replaced its image; probes detached",
}

// gather is how long notices are left to gather after a notice woke the watcher, before
// it reads them: a burst of execs (a shell loop, health checks that run curl) then costs
// the collector two wakeups a gather, not one a notice, of which an exec gives two or
// three. It delays a look at a process by as much at most, on top of watch.Settle.
const gather = 50 * time.Millisecond

// Watch runs discovery from the kernel hooks' notices, with a full scan of /proc every
// interval for anything they missed (a full notice buffer), until w is closed. Each
// process noticed is looked at once it has mapped nothing new for a while
// (watch.Queue): a loader maps a library before it relocates it.
func (r *Registry) Watch(w *watch.Watcher, interval time.Duration) {
	scan := r.now().Add(interval)
	r.follow(w, nil)
	var (
		queue watch.Queue
		got   []watch.Notice
		next  time.Time // after a notice woke the watcher, when to read what came since
		err   error
	)
	for {
		deadline := scan
		if due := queue.Next(); !due.IsZero() && due.Before(scan) {
			deadline = due
		}
		gathered := false
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
			deadline, gathered = time.Now(), true // what came meanwhile, without waiting
		}
		got, err = w.Read(deadline, got[:0])
		switch {
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
			r.log.Warn("reading process notices", zap.Error(err))
		}
		next = time.Time{}
		if len(got) > 0 && !gathered { // a notice woke the watcher: let the rest gather
			next = time.Now().Add(gather)
		}
		now := r.now()
		for _, n := range got {
			if why, gone := retired[n.Kind]; gone {
				var exit *watch.Exit
				if n.Kind == watch.Exited {
					exit = &n.Exit
				}
				r.tracer.Retire(n.PID, why, exit)
			}
			if n.Kind != watch.Exited { // Mapped, or Execed: a new image to look at
				queue.Add(n.PID, now)
			}
		}
		if !now.Before(scan) {
			_ = r.Scan(false)
			r.follow(w, nil)
			scan = now.Add(interval)
			queue.Clear()
			clear(r.again)
			continue
		}
		if due := queue.Due(now); len(due) > 0 {
			r.follow(w, due)
			r.Notice(due)
			for pid := range r.again { // mapped, not yet relocated
				queue.Add(pid, now)
			}
		}
	}
}
