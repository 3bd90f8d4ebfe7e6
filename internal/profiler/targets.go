package profiler

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

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
	"github.com/profinfer/profinfer/internal/registry"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/runtimes"
)

// tracked is one process with probes attached.
type tracked struct {
	proc       export.Origin
	runtime    *runtimes.Runtime
	args       []string // its command line
	parent     string   // the executable of the process that started it
	attachment *probe.Attachment
	backends   *backends.Resolver
	// The llama_context of its latest decode, and where its size and threads are (nil
	// without libllama or when its getters are not plain loads).
	ctx         uint64
	ctxFields   *ggml.Context
	whisper     *runtimes.WhisperFields // where its whisper_context holds the model's hyperparameters, or nil
	describer   *describe.Describer
	warned      bool   // a failure to attach the node probes was logged
	device      bool   // a split ran on a backend other than the CPU: the device probes were asked for
	schedSeen   bool   // a backend scheduler was seen made: its backends decided the split probes
	schedAsked  bool   // a read of its scheduler's backends was asked for (AttachSchedRead), and is not done
	multi       bool   // a scheduler with a backend besides the CPU's was seen made
	splits      bool   // the split probes were asked for, and not to go
	quotaWarned bool   // a failure to read its cgroup CPU quota was logged
	noModel     bool   // its model file could not be read
	modelVSize  uint64 // its virtual size when no model was found: look again once it grows
	// looking says that the lookup goroutine reads its new context (newContext); held are
	// its decodes that wait for it.
	looking  bool
	held     []*assemble.Step
	heldJobs []*assemble.Job // jobs that ended while their steps were held, exported after them
}

// Trace puts probes on a GGML process the registry found, and starts tracking it.
func (p *Profiler) Trace(f *registry.Found) error {
	defer p.busy()()
	pid, proc := f.Proc.PID, f.Proc
	progs, err := p.bpf.Programs.For(f.Target.Layout)
	if err != nil {
		return registry.Refuse(metadata.AttributeProfinferAttachReasonProbes, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	a, err := probe.Attach(p.pool, progs, proc, p.reg.Files.Open, p.cfg.Layers, p.bpf.Multi())
	if a == nil {
		return registry.Refuse(metadata.AttributeProfinferAttachReasonProbes, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	switch {
	case err != nil && p.reg.Vanished(pid):
		p.log.Debug("some probes not attached: the process exited or unmapped GGML", zap.Int("pid", pid), zap.Error(err))
	case err != nil:
		p.log.Warn("some probes not attached", zap.Int("pid", pid), zap.Error(err))
	}
	t := &tracked{
		proc: export.Origin{PID: pid, VPID: proc.VPID, Exe: proc.Exe, BuildID: f.BuildID, GGML: f.Target.Version,
			Container: f.Container, Backends: strings.Join(proc.Backends, ","), Runtime: f.Runtime.Name},
		runtime:    f.Runtime,
		args:       f.Process.Args,
		parent:     f.Process.Parent,
		attachment: a,
		backends:   backends.NewResolver(p.reg.FS(), "/proc", pid, p.reg.Files.Get, proc.Modules[:]...),
		describer:  describe.New(f.Target),
		ctxFields:  f.Context,
		whisper:    f.Whisper,
		noModel:    !f.Runtime.GGUF, // whisper's model is read from its context
	}
	p.mu.Lock()
	// The lasting probes serve every process that maps their files, and report only the
	// traced ones.
	if err := probe.Trace(&p.bpf.ProfinferMaps, pid, true); err != nil {
		_ = probe.Trace(&p.bpf.ProfinferMaps, pid, false)
		p.mu.Unlock()
		a.Close()
		return registry.Refuse(metadata.AttributeProfinferAttachReasonProbes, proc.Exe, fmt.Errorf("pid %d (%s): not marked traced: %w", pid, proc.Exe, err))
	}
	p.tracked[pid] = t
	p.applicationLayer(t)
	switch {
	case !p.cfg.Layers.Runtime:
	case p.cfg.Nodes.Mode == NodesSampled:
		p.windows.Add(pid, workload(pid, proc.Exe), nodeProbes{p, t})
	case p.cfg.Nodes.Mode == NodesAll: // one window, for good
		p.windows.Add(pid, "", nodeProbes{p, t})
	}
	// The split probes from the start where the process loaded another backend that it
	// would not load unused, whose first decode may come before they could be added once
	// its scheduler is seen, or where schedulers are not seen.
	if !a.SeesScheds() || slices.ContainsFunc(proc.Backends, loadedToUse) {
		t.splits = true
		if err := a.AttachSplits(); err != nil {
			p.log.Warn("split probes not attached", zap.Int("pid", pid), zap.Error(err))
		}
	}
	probes, splits := a.Probes(), a.Splits()
	p.mu.Unlock()
	p.wakeController() // to look for its model file, and to time its windows
	p.log.Info("attached", zap.Int("pid", pid), zap.String("exe", proc.Exe), zap.String("runtime", f.Runtime.Name),
		zap.String("ggml", cmp.Or(f.Target.Version, "unknown")),
		zap.String("container", cmp.Or(f.Container, "none")), zap.Int("probes", probes), zap.Int("emulated", a.Emulated()),
		zap.Bool("split_probes", splits))
	return nil
}

// Extend adds to a traced process the probes on GGML objects it mapped since profinfer
// attached: a binding that loads libllama with dlopen after its backend.
func (p *Profiler) Extend(proc *discover.Process, ctx *ggml.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tracked[proc.PID]
	if t == nil {
		return
	}
	t.proc.Backends = strings.Join(proc.Backends, ",") // a binding loads its GPU backend with dlopen too
	added, err := t.attachment.Extend(proc)
	if err != nil {
		p.log.Warn("some probes not attached", zap.Int("pid", proc.PID), zap.Error(err))
	}
	if len(added) == 0 {
		return
	}
	if slices.Contains(added, discover.Llama) {
		t.ctxFields = ctx
	}
	if rt, _ := runtimes.Of(runtimes.Process{Process: proc, Args: t.args, Parent: t.parent}); rt != nil && rt != t.runtime {
		p.log.Info("runtime recognised in code loaded since attach", zap.Int("pid", proc.PID), zap.String("runtime", rt.Name),
			zap.String("was", t.runtime.Name))
		t.runtime, t.proc.Runtime = rt, rt.Name
		t.noModel = t.noModel && !rt.GGUF
	}
	p.applicationLayer(t)
	p.log.Info("probes added on code loaded since attach", zap.Int("pid", proc.PID), zap.Stringers("roles", added),
		zap.Int("probes", t.attachment.Probes()))
}

// applicationLayer places or removes the step probes as t's runtime wants them, and has
// the assembler hold the graphs that come before its first step. Called with p.mu held.
func (p *Profiler) applicationLayer(t *tracked) {
	if !p.cfg.Layers.Application {
		return
	}
	pid := t.proc.PID
	if t.runtime.Steps {
		if err := t.attachment.AttachSteps(); err != nil {
			p.log.Warn("step probes not attached", zap.Int("pid", pid), zap.Error(err))
		}
	} else if gone := t.attachment.DetachSteps(); len(gone) > 0 {
		p.closeLater(gone)
	}
	// A runtime's graphs come inside its steps: those before the first step's entry are
	// of a step profinfer came in the middle of. A program of no runtime profinfer knows
	// (an RPC server) may compute none in a scheduler: its graphs go as they come.
	if t.runtime != runtimes.GGML && (t.runtime.Steps || t.attachment.Proc().Module(discover.Llama) != nil) {
		p.asm.Steps(uint32(pid))
	}
}

// Traced is the set of traced processes.
func (p *Profiler) Traced() map[int]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := make(map[int]bool, len(p.tracked))
	for pid := range p.tracked {
		set[pid] = true
	}
	return set
}

// Scanned has the controller close the perf counters of threads that are gone.
func (p *Profiler) Scanned() {
	if p.counters == nil {
		return
	}
	p.mu.Lock()
	p.effects = append(p.effects, effect{kind: sweep})
	p.mu.Unlock()
	p.wakeController()
}

// retiring is a traced process that exited or replaced its image, and why.
type retiring struct {
	pid int
	why string
}

// Retire has the reader drop a traced process once it has read the process's last
// events, which may still wait in the ring buffer: it flushes the reader, which reaps
// when it has drained the ring.
func (p *Profiler) Retire(pid int, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
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
			t.looking = false
			p.release(t)
			p.endRequests(t, requests.Exited)
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
	p.sweepPool()
}

// sweepPool removes the files' probes that no process held for probe.Linger: a file's
// probes stay for the next process that maps it, for a while, and go as another process
// exits, at discovery's next scan of /proc, or with the collector.
func (p *Profiler) sweepPool() {
	if idle := p.pool.Sweep(time.Now()); len(idle) > 0 {
		p.closeLater(idle)
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

// modelSearch is how often the processes without a model file are looked at again.
const modelSearch = time.Second

// findModels looks for the model file of each traced process that has none yet: a server
// loads its model some time after it starts, and after profinfer attached. A process is
// looked at again only once its mappings grew (an RPC server never loads a model).
func (p *Profiler) findModels() {
	type look struct {
		pid   int
		vsize uint64
		named string
	}
	p.mu.Lock()
	var todo []look
	for pid, t := range p.tracked {
		if t.proc.Model == nil && !t.noModel {
			todo = append(todo, look{pid, t.modelVSize, runtimes.ModelArg(t.args)})
		}
	}
	p.mu.Unlock()
	if len(todo) > 0 {
		defer p.busy()()
	}
	for _, l := range todo {
		m, changed := p.reg.LookForModel(l.pid, l.vsize, l.named)
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

// setModel records what a look for t's model found. Called with p.mu held.
func (p *Profiler) setModel(t *tracked, m registry.ModelLook) {
	pid := t.proc.PID
	switch {
	case !m.Found:
		t.modelVSize = m.VSize
	case m.Err != nil:
		t.noModel = true // unreadable: say so once, and go on without
		p.log.Warn("model file not described", zap.Int("pid", pid), zap.Error(m.Err))
	default:
		info := m.Info
		info.Name = t.runtime.ModelName(filepath.Join("/proc", strconv.Itoa(pid), "root", m.Path), m.Path, info.Name)
		t.proc.Model = &info
		p.log.Info("model", zap.Int("pid", pid), zap.String("path", m.Path), zap.String("architecture", m.Info.Architecture),
			zap.Uint64("parameters", m.Info.Parameters), zap.String("file_type", m.Info.FileType))
	}
}

// newContext notes that process t decodes with llama_context ctx, new to profinfer. A
// context means a loaded model: the controller reads the context's size and threads and
// looks for the model file, and until it has, t's decodes wait, so that their spans name
// both. Called by the reader with p.mu held, once per context: per decode it would
// cost every token syscalls.
func (p *Profiler) newContext(t *tracked, ctx uint64) {
	t.ctx = ctx
	t.looking = true
	p.effects = append(p.effects, effect{kind: contextSeen, pid: t.proc.PID})
}

// maxHeld bounds the decodes a process keeps waiting for its context's lookup; past it
// they are exported without.
const maxHeld = 256

// modelsMissing says whether some traced process has no model file yet. Called with p.mu
// held.
func (p *Profiler) modelsMissing() bool {
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
	ctx, fields, whisper, vsize, named := t.ctx, t.ctxFields, t.whisper, t.modelVSize, runtimes.ModelArg(t.args)
	search := t.proc.Model == nil && !t.noModel
	p.mu.Unlock()
	defer p.busy()() // after the unlock below

	// The context first: the process may free it soon (llama-bench makes one per test).
	size, threads, err := 0, 0, error(nil)
	if fields != nil {
		size, threads, err = p.reg.ReadContext(pid, fields, ctx)
		if err != nil {
			p.log.Debug("llama_context not read", zap.Int("pid", pid), zap.Error(err))
		}
	}
	var wm *model.Whisper
	if whisper != nil {
		if m, err := p.reg.ReadWhisper(pid, whisper, ctx); err != nil {
			p.log.Debug("whisper_context not read", zap.Int("pid", pid), zap.Error(err))
		} else {
			wm = &m
		}
	}
	var m registry.ModelLook
	found := false
	if search {
		m, found = p.reg.LookForModel(pid, vsize, named)
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
	if wm != nil {
		t.proc.Whisper = wm
		p.log.Info("whisper model", zap.Int("pid", pid), zap.String("type", wm.Type), zap.Int("audio_layers", wm.AudioLayers),
			zap.Int("audio_state", wm.AudioState), zap.Int("text_layers", wm.TextLayers), zap.Int("text_state", wm.TextState),
			zap.String("file_type", wm.FileType))
	}
	if t.ctx == ctx { // else a newer context's lookup is on its way
		t.looking = false
		p.release(t)
	}
}

// release exports the decodes t kept waiting for its context's lookup, once it is done.
// Called with p.mu held.
func (p *Profiler) release(t *tracked) {
	if t.looking {
		return
	}
	s := sink{p}
	for _, d := range t.held {
		s.export(t, d)
		if p.pendingFull {
			p.handOver()
		}
	}
	clear(t.held)
	t.held = t.held[:0]
	for _, j := range t.heldJobs {
		s.Job(j)
	}
	clear(t.heldJobs)
	t.heldJobs = t.heldJobs[:0]
}

// endRequests ends every request of t, for why. Called with p.mu held.
func (p *Profiler) endRequests(t *tracked, why requests.End) {
	p.ended = p.reqs.End(uint32(t.proc.PID), why, p.ended[:0])
	for _, r := range p.ended {
		sink{p}.request(t, r)
	}
}

// schedMade notes that process t made a backend scheduler with n backends, the CPU's
// among them. Where the CPU is alone, the split probes go (or stay off), each CPU graph
// standing for its split: they would cost every token two probe hits, one a return
// probe's. Called by the reader with p.mu held.
func (p *Profiler) schedMade(t *tracked, n int) {
	t.schedSeen = true
	if t.schedAsked { // its read is done
		t.schedAsked = false
		p.effects = append(p.effects, effect{kind: schedRead, pid: t.proc.PID})
	}
	switch {
	case n > 1:
		t.multi = true
		p.wantSplits(t)
	case t.multi: // an earlier scheduler has another backend
	case t.splits:
		t.splits = false
		p.effects = append(p.effects, effect{kind: splitsUnwanted, pid: t.proc.PID})
	}
}

// computes notes that process t decodes or computes a graph: with no scheduler seen made
// (profinfer came after), its scheduler's backends are read at its next graph. Called by
// the reader with p.mu held.
func (p *Profiler) computes(t *tracked) {
	if !t.schedSeen && !t.schedAsked {
		t.schedAsked = true
		p.effects = append(p.effects, effect{kind: schedWanted, pid: t.proc.PID})
	}
}

// wantSplits has the controller add t's split probes. Called with p.mu held.
func (p *Profiler) wantSplits(t *tracked) {
	if !t.splits {
		t.splits = true
		p.effects = append(p.effects, effect{kind: splitsWanted, pid: t.proc.PID})
	}
}

// setBackendProbes adds or removes the split probes and the scheduler's read, in the order
// asked. Called with p.mu held, as windows attach theirs.
func (p *Profiler) setBackendProbes(asked []effect) {
	for _, e := range asked {
		t := p.tracked[e.pid]
		if t == nil {
			continue
		}
		var gone probe.Links
		switch e.kind {
		case splitsWanted:
			if err := t.attachment.AttachSplits(); err != nil {
				p.log.Warn("split probes not attached", zap.Int("pid", e.pid), zap.Error(err))
			}
		case splitsUnwanted:
			gone = t.attachment.DetachSplits()
		case schedWanted:
			ok, err := t.attachment.AttachSchedRead()
			if ok || t.schedSeen {
				break
			}
			// The backends stay unknown: the split probes are needed.
			p.log.Debug("scheduler not read", zap.Int("pid", e.pid), zap.Error(err))
			t.splits = true
			if err := t.attachment.AttachSplits(); err != nil {
				p.log.Warn("split probes not attached", zap.Int("pid", e.pid), zap.Error(err))
			}
		case schedRead:
			gone = t.attachment.DetachSchedRead()
		}
		if len(gone) > 0 {
			p.closeLater(gone)
		}
	}
}

// loadedToUse says whether a process that loaded the library of a backend, named as
// discover names it, is likely to compute on it from its first decode. RPC's is linked
// into every build made with it, whether a server is named or not: a process that uses
// one has its split probes once its scheduler is seen made with it, before its first
// decode, and its CPU graphs stand for their splits until they are placed.
func loadedToUse(backend string) bool { return backend != "rpc" }
