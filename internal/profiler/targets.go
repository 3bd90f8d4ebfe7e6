package profiler

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/prometheus/procfs"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/describe"
	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/export"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/symbols"
	"github.com/profinfer/profinfer/internal/watch"
)

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

// refusal is a GGML process profinfer cannot profile: never a silent skip.
type refusal struct {
	reason metadata.AttributeProfinferAttachReason
	exe    string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(reason metadata.AttributeProfinferAttachReason, exe string, err error) error {
	return &refusal{reason: reason, exe: exe, err: err}
}

// tracked is one process with probes attached.
type tracked struct {
	proc       export.Origin
	attachment *probe.Attachment
	backends   *backends.Resolver
	// The llama_context of its latest decode, and where its size and threads are (nil
	// without libllama or when its getters are not plain loads).
	ctx        uint64
	ctxFields  *ggml.Context
	describer  *describe.Describer
	warned     bool   // a failure to attach the node probes was logged
	noModel    bool   // its model file could not be read
	modelVSize uint64 // its virtual size when no model was found: look again once it grows
	// looking says that the lookup goroutine reads its new context (newContext); held
	// are its decodes that wait for it.
	looking bool
	held    []*assemble.Decode
}

// candidates returns the PIDs the configuration selects, and for each whether it was named
// explicitly (so that "not GGML" is an error rather than a skip).
func (p *Profiler) candidates() (map[int]bool, error) {
	pids := map[int]bool{}
	if len(p.cfg.Targets) == 0 {
		all, err := discover.PIDs(p.procfs, "")
		for _, pid := range all {
			pids[pid] = false
		}
		return pids, err
	}
	var errs []error
	for _, t := range p.cfg.Targets {
		if t.PID != 0 {
			pids[t.PID] = true
			continue
		}
		ps, err := discover.PIDs(p.procfs, t.Executable)
		errs = append(errs, err)
		for _, pid := range ps {
			pids[pid] = false
		}
	}
	return pids, errors.Join(errs...)
}

// discover scans /proc: it attaches to new GGML processes and detaches from those that
// exited. On the first pass (at Start) errors about targets are returned when they
// propagate.
func (p *Profiler) discover(first bool) error {
	pids, err := p.candidates()
	if err != nil {
		p.log.Debug("listing processes", zap.Error(err))
	}
	// What is known is read under the lock, /proc outside it: the reader shares the lock.
	p.mu.Lock()
	traced := maps.Clone(p.tracked)
	failed := maps.Clone(p.failed)
	p.mu.Unlock()
	rechecked := map[int]rejected{} // looked at again and unchanged
	var gone []int
	for pid := range traced {
		if _, ok := pids[pid]; !ok || !alive(pid) {
			gone = append(gone, pid)
		}
	}
	now := time.Now()
	var todo []int
	for pid := range pids {
		if traced[pid] != nil {
			continue
		}
		if r, ok := failed[pid]; ok {
			if now.Sub(r.at) < recheck {
				continue
			}
			if v, err := discover.VSize(p.procfs, pid); err != nil || v == r.vsize {
				rechecked[pid] = rejected{at: now, vsize: r.vsize, refused: r.refused}
				continue
			}
		}
		todo = append(todo, pid)
	}
	p.mu.Lock()
	for _, pid := range gone {
		p.retire(pid, retired[watch.Exited])
	}
	for pid := range failed {
		if _, ok := pids[pid]; !ok {
			delete(p.failed, pid)
		}
	}
	for pid, r := range rechecked {
		if cur, ok := p.failed[pid]; ok && cur == failed[pid] { // not attached to meanwhile
			p.failed[pid] = r
		}
	}
	if p.counters != nil {
		if err := p.counters.Sweep(func(pid, tid uint32) bool {
			return p.tracked[int(pid)] != nil && alive(int(pid), "task", strconv.Itoa(int(tid)))
		}); err != nil {
			p.log.Debug("closing perf counters", zap.Error(err))
		}
	}
	p.mu.Unlock()
	return p.attachAll(pids, todo, first)
}

// look attaches to the processes the kernel hooks noticed mapping code, those of them the
// configuration selects. A notice means new code, so processes rejected before are looked
// at again.
func (p *Profiler) look(noticed []int) {
	slices.Sort(noticed)
	named := map[int]bool{}
	var todo []int
	for _, pid := range slices.Compact(noticed) {
		ok, isNamed := p.selects(pid)
		p.mu.Lock()
		traced := p.tracked[pid] != nil
		p.mu.Unlock()
		switch {
		case !ok:
		case traced:
			p.extend(pid)
		default:
			named[pid] = isNamed
			todo = append(todo, pid)
		}
	}
	_ = p.attachAll(named, todo, false)
}

// extend adds to traced process pid the probes on GGML objects it mapped since profinfer
// attached: a binding that loads libllama with dlopen after its backend.
func (p *Profiler) extend(pid int) {
	proc, err := discover.Inspect(p.procfs, "/proc", pid, p.elfCache.classify)
	if err != nil || proc == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tracked[pid]
	if t == nil {
		return
	}
	added, err := t.attachment.Extend(proc)
	if err != nil {
		p.log.Warn("some probes not attached", zap.Int("pid", pid), zap.Error(err))
	}
	if len(added) == 0 {
		return
	}
	if slices.Contains(added, discover.Llama) {
		t.ctxFields = p.contextFields(pid, proc)
	}
	p.log.Info("probes added on code loaded since attach", zap.Int("pid", pid), zap.Stringers("roles", added),
		zap.Int("probes", t.attachment.Probes()))
}

// contextFields finds where process pid's llama_context keeps its size and threads; nil
// without libllama or the application layer, or when its getters are not plain loads.
func (p *Profiler) contextFields(pid int, proc *discover.Process) *ggml.Context {
	m := proc.Module(discover.Llama)
	if m == nil || !p.cfg.Layers.Application {
		return nil
	}
	lf, err := p.elfCache.open(m)
	if err != nil {
		return nil
	}
	c, err := ggml.ContextIn(lf)
	if err != nil {
		p.log.Warn("context size and threads not reported", zap.Int("pid", pid), zap.Error(err))
		return nil
	}
	return &c
}

// selects says whether the configuration selects process pid, and whether by its PID.
func (p *Profiler) selects(pid int) (selected, named bool) {
	if pid == os.Getpid() {
		return false, false
	}
	if len(p.cfg.Targets) == 0 {
		return true, false
	}
	exe := ""
	for _, t := range p.cfg.Targets {
		if t.PID == pid {
			return true, true
		}
		if t.Executable == "" {
			continue
		}
		if exe == "" {
			proc, err := p.procfs.Proc(pid)
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

// attachAll attaches to the processes in todo; named says which of them the
// configuration names by PID, so that "not GGML" is an error rather than a skip. On the
// first pass errors are returned when they propagate.
func (p *Profiler) attachAll(named map[int]bool, todo []int, first bool) error {
	now := time.Now()
	for _, pid := range todo {
		vsize, _ := discover.VSize(p.procfs, pid) // before: a dlopen during attach counts as a change
		err := p.attach(pid)
		if err == nil {
			continue
		}
		var r *refusal
		refused := errors.As(err, &r)
		p.mu.Lock()
		prev, again := p.failed[pid]
		p.failed[pid] = rejected{at: now, vsize: vsize, refused: prev.refused || refused}
		p.mu.Unlock()
		if !named[pid] || again {
			// Found by discovery or by its executable, not named: most processes are not
			// GGML, and some (init, other namespaces' helpers) cannot even be read. A GGML
			// process that cannot be profiled is worth a word and a count, once.
			if refused && !prev.refused {
				p.mu.Lock()
				p.tele.AttachFailures[r.reason]++
				p.mu.Unlock()
				p.log.Warn("GGML process not profiled", zap.Int("pid", pid), zap.String("executable", r.exe),
					zap.String("reason", r.reason.String()), zap.Error(err))
			} else {
				p.log.Debug("process not attached", zap.Int("pid", pid), zap.Error(err))
			}
			continue
		}
		if err := p.targetError(err); err != nil && first {
			return err
		}
	}
	return nil
}

// retiring is a traced process that exited or replaced its image, and why.
type retiring struct {
	pid int
	why string
}

// retire has the reader drop a traced process once it has read the process's last
// events, which may still wait in the ring buffer: it flushes the reader, which reaps
// when it has drained the ring. Called with p.mu held.
func (p *Profiler) retire(pid int, why string) {
	if p.tracked[pid] == nil {
		return
	}
	p.retiring = append(p.retiring, retiring{pid, why})
	if err := p.reader.Flush(); err != nil {
		p.log.Debug("flushing the ring buffer", zap.Error(err))
	}
}

// reap drops the retiring processes. The reader calls it after a flush, once every event
// submitted before it has been dispatched.
func (p *Profiler) reap() {
	p.mu.Lock()
	var gone []*probe.Attachment
	for _, r := range p.retiring {
		if t := p.tracked[r.pid]; t != nil {
			p.asm.Exit(uint32(r.pid))
			p.release(t)
			p.acc.Forget(r.pid)
			delete(p.tracked, r.pid)
			p.windows.Remove(r.pid)
			_ = probe.Trace(&p.bpf.ProfinferMaps, r.pid, false)
			gone = append(gone, t.attachment)
			p.log.Info(r.why, zap.Int("pid", r.pid))
		}
	}
	p.retiring = p.retiring[:0]
	p.mu.Unlock()
	for _, a := range gone {
		p.closeLater(a)
	}
}

// closeLater closes probes on a goroutine of their own: removing a uprobe waits for the
// kernel's grace periods, about 0.1 s a probe here, and the reader must not stall on it
// while the ring buffer fills. Until then the probes still fire.
func (p *Profiler) closeLater(c io.Closer) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := c.Close(); err != nil {
			p.log.Debug("closing probes", zap.Error(err))
		}
	}()
}

// retired says why a notice retires a traced process.
var retired = map[watch.Kind]string{
	watch.Exited: "target exited; probes detached",
	watch.Execed: "target replaced its image; probes detached",
}

// watchLoop runs discovery from the kernel hooks' notices, with a full scan of /proc
// every DiscoveryInterval for anything they missed (a full notice buffer).
func (p *Profiler) watchLoop(w *watch.Watcher) {
	defer p.wg.Done()
	scan := time.Now().Add(p.cfg.DiscoveryInterval)
	var queue watch.Queue
	for {
		deadline := scan
		if next := queue.Next(); !next.IsZero() && next.Before(scan) {
			deadline = next
		}
		n, err := w.Read(deadline)
		switch {
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
		case err != nil:
			p.log.Warn("reading process notices", zap.Error(err))
		default:
			if why, gone := retired[n.Kind]; gone {
				p.mu.Lock()
				p.retire(n.PID, why)
				p.mu.Unlock()
			}
			if n.Kind == watch.Exited {
				break
			}
			// Mapped, or Execed: a new image to look at.
			queue.Add(n.PID, time.Now())
		}
		now := time.Now()
		if !now.Before(scan) {
			_ = p.discover(false)
			scan = now.Add(p.cfg.DiscoveryInterval)
			queue.Clear()
			continue
		}
		if due := queue.Due(now); len(due) > 0 {
			p.look(due)
		}
	}
}

var (
	errNotGGML  = errors.New("maps no GGML CPU backend")
	errStripped = errors.New("stripped of its symbol table")
	errVanished = errors.New("gone before it could be profiled")
)

// notGGML says why process pid, which maps no GGML CPU backend, cannot be profiled. Its
// executable may be a static GGML build that was stripped: that is told apart (by
// reading its read-only data) when the configuration names targets, or when the
// executable's name says llama or ggml, so that discovery does not read every program.
func (p *Profiler) notGGML(pid int) error {
	exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	base := filepath.Base(exe)
	if (len(p.cfg.Targets) > 0 || strings.Contains(base, "llama") || strings.Contains(base, "ggml")) &&
		symbols.StrippedGGML(filepath.Join("/proc", strconv.Itoa(pid), "exe")) {
		return refuse(metadata.AttributeProfinferAttachReasonStripped, exe, fmt.Errorf(
			"pid %d: %s is a GGML build %w: it defines none of %s; profile an unstripped build",
			pid, exe, errStripped, strings.Join(discover.RoleSymbol[:], ", ")))
	}
	return fmt.Errorf("pid %d is not a GGML process: it %w", pid, errNotGGML)
}

// modelSearch is how often the processes without a model file are looked at again.
const modelSearch = time.Second

// findModels looks for the model file of each traced process that has none yet: a server
// loads its model some time after it starts, and after profinfer attached. A process is
// looked at again only once its mappings grew (an RPC server never loads a model).
func (p *Profiler) findModels() {
	type look struct {
		pid   int
		vsize uint64
	}
	p.mu.Lock()
	var todo []look
	for pid, t := range p.tracked {
		if t.proc.Model == nil && !t.noModel {
			todo = append(todo, look{pid, t.modelVSize})
		}
	}
	p.mu.Unlock()
	for _, l := range todo {
		m, changed := lookForModel(p.procfs, l.pid, l.vsize)
		if !changed {
			continue
		}
		p.mu.Lock()
		// The reader may have found it meanwhile, at a new context.
		if t := p.tracked[l.pid]; t != nil && t.proc.Model == nil && !t.noModel {
			p.setModel(t, m)
		}
		p.mu.Unlock()
	}
}

// modelLook is what a look for a process's model file found.
type modelLook struct {
	vsize uint64 // the process's virtual size when it was looked at
	found bool
	path  string
	info  model.Info
	err   error
}

// lookForModel looks for the model file of process pid, unless its virtual size is still
// vsize, which it had when none was found (changed false).
func lookForModel(fs procfs.FS, pid int, vsize uint64) (m modelLook, changed bool) {
	v, err := discover.VSize(fs, pid)
	if err != nil || v == vsize {
		return m, false
	}
	m.vsize = v
	var host string
	if m.path, host, m.found = model.Find(fs, "/proc", pid); m.found {
		m.info, m.err = model.Read(host, m.path)
	}
	return m, true
}

// setModel records what a look for t's model found. Called with p.mu held.
func (p *Profiler) setModel(t *tracked, m modelLook) {
	pid := t.proc.PID
	switch {
	case !m.found:
		t.modelVSize = m.vsize
	case m.err != nil:
		t.noModel = true // unreadable: say so once, and go on without
		p.log.Warn("model file not described", zap.Int("pid", pid), zap.Error(m.err))
	default:
		t.proc.Model = &m.info
		p.log.Info("model", zap.Int("pid", pid), zap.String("path", m.path), zap.String("architecture", m.info.Architecture),
			zap.Uint64("parameters", m.info.Parameters), zap.String("file_type", m.info.FileType))
	}
}

// attach attaches to process pid. A process that exits, or unmaps GGML, while profinfer
// reads it and places probes makes reads and attaches fail with errors that say nothing
// of the cause; once it is seen gone, that is what the error says, and it is no refusal:
// nothing was refused, and a process that maps GGML again is looked at again.
func (p *Profiler) attach(pid int) error {
	mapped, err := p.attachGGML(pid)
	var r *refusal
	if errors.As(err, &r) && mapped && p.vanished(pid) {
		return fmt.Errorf("pid %d exited or unmapped GGML while profinfer attached: %w", pid, errVanished)
	}
	return err
}

// vanished says whether process pid is gone, or maps no GGML base or CPU backend now.
func (p *Profiler) vanished(pid int) bool {
	proc, err := discover.Inspect(p.procfs, "/proc", pid, p.elfCache.classify)
	return err != nil || proc == nil || proc.Module(discover.Base) == nil || proc.Module(discover.CPU) == nil
}

// attachGGML attaches to process pid, and says whether it found GGML's base and CPU
// backend mapped there.
func (p *Profiler) attachGGML(pid int) (mapped bool, err error) {
	proc, err := discover.Inspect(p.procfs, "/proc", pid, p.elfCache.classify)
	if err != nil {
		return false, fmt.Errorf("pid %d: %w", pid, err)
	}
	if proc == nil {
		return false, p.notGGML(pid)
	}
	// From here on the process is GGML: whatever stops it is a refusal, said and counted.
	base := proc.Module(discover.Base)
	if base == nil {
		return false, refuse(metadata.AttributeProfinferAttachReasonOther, proc.Exe, fmt.Errorf(
			"pid %d (%s): no object defines ggml_tensor_overhead: GGML's base library is not mapped", pid, proc.Exe))
	}
	f, err := p.elfCache.open(base)
	if err != nil {
		return true, refuse(metadata.AttributeProfinferAttachReasonOther, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	cpu := proc.Module(discover.CPU)
	if cpu == nil {
		return false, p.notGGML(pid) // a CPU backend may still come, with dlopen
	}
	cf, err := p.elfCache.open(cpu)
	if err != nil {
		return true, refuse(metadata.AttributeProfinferAttachReasonOther, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	if _, ok := probe.NodeSymbol(cf); !ok {
		return true, refuse(metadata.AttributeProfinferAttachReasonNoNodeProbe, proc.Exe, fmt.Errorf(
			"pid %d (%s): its CPU backend, %s, defines none of %s to probe nodes with",
			pid, proc.Exe, cpu.Path, strings.Join(probe.NodeSymbols, ", ")))
	}
	mem, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "mem"))
	if err != nil {
		return true, refuse(metadata.AttributeProfinferAttachReasonNoAccess, proc.Exe, fmt.Errorf("pid %d (%s): reading its memory: %w", pid, proc.Exe, err))
	}
	target, err := ggml.Inspect(f, mem, base.Bias)
	mem.Close()
	if err != nil {
		return true, refuse(metadata.AttributeProfinferAttachReasonUnsupportedLayout, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	progs, err := p.bpf.Programs.For(target.Layout)
	if err != nil {
		return true, refuse(metadata.AttributeProfinferAttachReasonProbes, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	a, err := probe.Attach(progs, proc, p.elfCache.open, p.cfg.Layers, p.bpf.Multi)
	if a == nil {
		return true, refuse(metadata.AttributeProfinferAttachReasonProbes, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	switch {
	case err != nil && p.vanished(pid):
		p.log.Debug("some probes not attached: the process exited or unmapped GGML", zap.Int("pid", pid), zap.Error(err))
	case err != nil:
		p.log.Warn("some probes not attached", zap.Int("pid", pid), zap.Error(err))
	}
	buildID := symbols.BuildIDOf(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	t := &tracked{
		proc:       export.Origin{PID: pid, VPID: proc.VPID, Exe: proc.Exe, BuildID: buildID, GGML: target.Version},
		attachment: a,
		backends:   backends.NewResolver(p.procfs, "/proc", pid, p.elfCache.get),
		describer:  describe.New(target),
	}
	t.ctxFields = p.contextFields(pid, proc)
	p.mu.Lock()
	p.tracked[pid] = t
	if err := probe.Trace(&p.bpf.ProfinferMaps, pid, true); err != nil {
		p.log.Warn("process not marked traced: no scheduler figures, exit noticed late", zap.Int("pid", pid), zap.Error(err))
	}
	if p.cfg.Nodes.Mode != NodesOff && p.cfg.Layers.Runtime {
		p.windows.Add(pid, nodeProbes{p, t})
	}
	probes := a.Probes()
	p.mu.Unlock()
	p.wakeController() // to look for its model file, and to time its windows
	p.log.Info("attached", zap.Int("pid", pid), zap.String("exe", proc.Exe), zap.String("ggml", cmp.Or(target.Version, "unknown")),
		zap.Int("probes", probes), zap.Int("emulated", a.Emulated()))
	return true, nil
}

// newContext notes that process t decodes with llama_context ctx, new to profinfer. A
// context means a loaded model: the controller reads the context's size and threads and
// looks for the model file, and until it has, t's decodes wait, so that their spans name
// both. Called by the reader with p.mu held, once per context: per decode it would
// cost every token syscalls.
func (p *Profiler) newContext(t *tracked, ctx uint64) {
	t.ctx = ctx
	t.looking = true
	p.effects = append(p.effects, effect{contextSeen, t.proc.PID})
}

// maxHeld bounds the decodes a process keeps waiting for its context's lookup; past it
// they are exported without.
const maxHeld = 256

// modelsMissing says whether some traced process has no model file yet.
func (p *Profiler) modelsMissing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.tracked {
		if t.proc.Model == nil && !t.noModel {
			return true
		}
	}
	return false
}

// readContext reads the llama_context process pid decodes with, and looks for its model
// if it has none, then exports the decodes that waited for it.
func (p *Profiler) readContext(pid int) {
	p.mu.Lock()
	t := p.tracked[pid]
	if t == nil || !t.looking {
		p.mu.Unlock()
		return
	}
	ctx, fields, vsize := t.ctx, t.ctxFields, t.modelVSize
	search := t.proc.Model == nil && !t.noModel
	p.mu.Unlock()

	// The context first: the process may free it soon (llama-bench makes one per test).
	size, threads, err := 0, 0, error(nil)
	if fields != nil {
		size, threads, err = readFields(pid, fields, ctx)
		if err != nil {
			p.log.Debug("llama_context not read", zap.Int("pid", pid), zap.Error(err))
		}
	}
	var m modelLook
	found := false
	if search {
		m, found = lookForModel(p.procfs, pid, vsize)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tracked[pid] != t {
		return
	}
	if found && t.proc.Model == nil && !t.noModel {
		p.setModel(t, m)
	}
	if fields != nil && err == nil {
		t.proc.CtxSize, t.proc.CtxThreads = size, threads
		p.log.Info("context", zap.Int("pid", pid), zap.Int("n_ctx", size), zap.Int("n_threads", threads))
	}
	if t.ctx == ctx { // else a newer context's lookup is on its way
		p.release(t)
	}
}

// release exports the decodes t kept waiting for its context's lookup. Called with p.mu
// held.
func (p *Profiler) release(t *tracked) {
	t.looking = false
	s := sink{p}
	for _, d := range t.held {
		s.export(t, d)
		if p.pendingFull {
			p.handOver()
		}
	}
	clear(t.held)
	t.held = t.held[:0]
}

// readFields reads the size and threads of llama_context ctx of process pid.
func readFields(pid int, fields *ggml.Context, ctx uint64) (size, threads int, err error) {
	mem, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "mem"))
	if err != nil {
		return 0, 0, err
	}
	defer mem.Close()
	return fields.Read(mem, ctx)
}

// alive says whether /proc/PID (and the path below it, such as task/TID) exists.
func alive(pid int, sub ...string) bool {
	_, err := os.Stat(filepath.Join(append([]string{"/proc", strconv.Itoa(pid)}, sub...)...))
	return err == nil
}

// elfCache keeps parsed ELF files by identity, so that many processes of one binary and
// repeated discovery passes parse each file once.
type elfCache struct {
	mu    sync.Mutex
	files map[[2]uint64]*symbols.File
	roles map[[2]uint64][]discover.Role
}

func newELFCache() *elfCache {
	return &elfCache{files: map[[2]uint64]*symbols.File{}, roles: map[[2]uint64][]discover.Role{}}
}

func (c *elfCache) get(path string, dev, inode uint64) (*symbols.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]uint64{dev, inode}
	if f := c.files[k]; f != nil {
		return f, nil
	}
	f, err := symbols.Open(path)
	if err != nil {
		return nil, err
	}
	c.files[k] = f
	return f, nil
}

func (c *elfCache) open(m *discover.Module) (*symbols.File, error) {
	return c.get(m.HostPath, m.Dev, m.Inode)
}

// classify scans the file's symbol tables for the role symbols without parsing them:
// most mapped files (libc, libstdc++, the runtime itself) play no role.
func (c *elfCache) classify(path string, dev, inode uint64) ([]discover.Role, error) {
	k := [2]uint64{dev, inode}
	c.mu.Lock()
	roles, ok := c.roles[k]
	c.mu.Unlock()
	if ok {
		return roles, nil
	}
	found, err := symbols.Defines(path, discover.RoleSymbol[:])
	if err != nil {
		return nil, err
	}
	for r, ok := range found {
		if ok {
			roles = append(roles, discover.Role(r))
		}
	}
	c.mu.Lock()
	c.roles[k] = roles
	c.mu.Unlock()
	return roles, nil
}

func (c *elfCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, f := range c.files {
		f.Close()
		delete(c.files, k)
	}
}
