package probe

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/profinfer/profinfer/bpf"
	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/symbols"
)

// Opener returns the parsed ELF of a module, cached by the caller.
type Opener func(m *discover.Module) (*symbols.File, error)

// Attachment is the set of probes on one process. The node probes are hit once per
// graph node per thread, so they come and go with AttachNodes and DetachNodes; the
// others stay for the life of the process: the lasting ones held in the pool, shared with
// every process that maps the same file, and a device's placed for the process alone.
type Attachment struct {
	PID int

	emulated map[string]bool // probed functions whose probe sits on an emulated instruction
	pool     *Pool
	progs    *progs
	proc     *discover.Process
	open     Opener
	layers   Layers
	multi    bool            // uprobe_multi links, see PrepareMulti
	builds   bool            // the build probe is attached
	scheds   bool            // the scheduler probe is attached
	devices  map[string]bool // the backends whose device probes are attached
	waitsAll bool            // ggml_backend_synchronize is probed: a backend had no synchronize of its own
	// loggerAgain: the Vulkan perf logger's flag was read again at the first split.
	loggerAgain bool
	// Logger is whether the process's ggml-vulkan times its nodes (GGML_VK_PERF_LOGGER),
	// as AttachDevice found it; with LoggerNodes the times are read.
	Logger LoggerState
	exes   map[*discover.Module]*link.Executable
	links  Links
	// extra are the probes of the groups that come and go by the process's backends
	// (split, schedRead); a group is absent while its probes are off.
	extra map[group]Links
	nodes Links
}

// Proc is the process as the attachment knows it: its modules as last extended.
func (a *Attachment) Proc() *discover.Process { return a.proc }

// Emulated is the number of probed functions whose entry probe sits on an instruction the
// kernel emulates.
func (a *Attachment) Emulated() int { return len(a.emulated) }

// Probes is the number of attached probes.
func (a *Attachment) Probes() int {
	n := len(a.links) + len(a.nodes)
	for _, l := range a.extra {
		n += len(l)
	}
	return n
}

// Attach holds the lasting probes of layers for process p, placing those pool lacks.
// Probes whose symbol is missing are reported in the error, joined, while the others stay
// attached; an error with nothing attached closes everything. Process p must be traced
// (Trace) for its probes to fire. multi says whether the programs were prepared by
// PrepareMulti.
func Attach(pool *Pool, progs *bpf.ProfinferPrograms, p *discover.Process, open Opener, layers Layers, multi bool) (*Attachment, error) {
	a := &Attachment{PID: p.PID, pool: pool, progs: progs, proc: p, open: open, layers: layers, multi: multi,
		exes: map[*discover.Module]*link.Executable{}, emulated: map[string]bool{}, extra: map[group]Links{},
		devices: map[string]bool{}}
	var err error
	a.links, err = a.attach(func(s spec) bool { return a.always(s.group) })
	if len(a.links) == 0 && err != nil {
		return nil, err
	}
	return a, err
}

// AttachNodes adds the node probes (and the barrier's, with Layers.Barriers, and the
// graph exit of each thread, with Layers.Counters). Those that cannot be attached are
// reported, joined; the others stay.
func (a *Attachment) AttachNodes() error {
	if len(a.nodes) > 0 {
		return nil
	}
	var err error
	a.nodes, err = a.attach(func(s spec) bool {
		return s.group == node || s.group == barrier && a.layers.Barriers || s.group == counted && a.layers.Counters
	})
	return err
}

// AttachSplits adds the split probes, which see each backend's share of a graph. They
// cost every token two probe hits, one of them a return probe's, for what the graph
// probes see alone where the CPU is the only backend: they are for processes whose
// scheduler has another backend, or may have (SeesScheds).
func (a *Attachment) AttachSplits() error { return a.attachExtra(split) }

// Splits says whether the split probes are in place.
func (a *Attachment) Splits() bool { return len(a.extra[split]) > 0 }

// DetachSplits takes the split probes out of the attachment and returns them, for the
// caller to close, as DetachNodes does.
func (a *Attachment) DetachSplits() Links { return a.detachExtra(split) }

// AttachSchedRead adds a probe that reads the backends of the scheduler a process
// computes with, at its next graph: for a process whose scheduler was made before
// profinfer came. It reports what the scheduler probe would have (SeesScheds), and is
// for DetachSchedRead once it did. It says whether the probe is in place.
func (a *Attachment) AttachSchedRead() (bool, error) {
	err := a.attachExtra(schedRead)
	return len(a.extra[schedRead]) > 0, err
}

// DetachSchedRead takes the probe AttachSchedRead added out, for the caller to close.
func (a *Attachment) DetachSchedRead() Links { return a.detachExtra(schedRead) }

// AttachSteps adds the probes that see each of the process's scheduler computations as
// a step: its runtime's unit of work where it has no llama_decode (whisper.cpp, Ollama's
// own engine, any other GGML program). They are the process's own, for DetachSteps should
// its runtime turn out to be llama.cpp, whose decodes hold them.
func (a *Attachment) AttachSteps() error { return a.attachExtra(step) }

// DetachSteps takes the step probes out, for the caller to close.
func (a *Attachment) DetachSteps() Links { return a.detachExtra(step) }

// attachExtra adds group g's probes, if it has none yet and its layer is on.
func (a *Attachment) attachExtra(g group) error {
	on := a.layers.Runtime
	if g == step {
		on = a.layers.Application
	}
	if _, ok := a.extra[g]; ok || !on {
		return nil
	}
	links, err := a.attach(func(s spec) bool { return s.group == g })
	a.extra[g] = links
	return err
}

// detachExtra takes group g's probes out, for the caller to close.
func (a *Attachment) detachExtra(g group) Links {
	l := a.extra[g]
	delete(a.extra, g)
	return l
}

// SeesScheds says whether the making of backend schedulers is probed: without it, the
// split probes are needed from the start.
func (a *Attachment) SeesScheds() bool { return a.scheds }

// AttachDevices adds the device probes for each backend that process p loaded as a
// library of its own and that computes on a device, from the start: a short job on a GPU
// is over before probes that wait for its first device split could come. A process
// whose device found nothing to compute pays only for their placing.
func (a *Attachment) AttachDevices(p *discover.Process) error {
	var errs error
	for _, lib := range p.Backends {
		m := p.Libraries[lib]
		if m == nil || !backends.OnDevice(lib) {
			continue
		}
		f, err := a.open(m)
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		if backend := backends.Registered(f); backend != "" && !a.devices[backend] {
			errs = errors.Join(errs, a.AttachDevice(m, backend))
		}
	}
	return errs
}

// AttachDevice adds the probes that see a device's work: the CPU's waits for a backend,
// and the copies the device queues, probed in dev, the object holding the code of the
// backend named backend. They come when the process attaches with the backend's library
// loaded (AttachDevices), or else once it computes a split on that backend, and stay.
// Called again at a backend's first split, it reads the Vulkan perf logger's flag anew:
// placed at the attach, the probes may have come before the backend read its
// environment.
func (a *Attachment) AttachDevice(dev *discover.Module, backend string) error {
	if !a.layers.Runtime {
		return nil
	}
	if a.devices[backend] {
		if backend != backends.Vulkan || a.Logger != LoggerOff || a.loggerAgain || dev == nil {
			return nil
		}
		a.loggerAgain = true
		f, err := a.open(dev)
		if err != nil {
			return err
		}
		return a.attachLogger(dev, f)
	}
	a.devices[backend] = true
	var (
		f                         *symbols.File
		waits                     Links
		err, queuedErr, loggerErr error
	)
	if dev == nil || backend == backends.Unknown {
		queuedErr = fmt.Errorf("pid %d: the %s backend's code has no symbols (stripped?): the copies it queues are not seen", a.PID, backend)
	} else if f, err = a.open(dev); err == nil {
		// The backend's own synchronize sees only its waits: 12 a token on Vulkan, where
		// ggml_backend_synchronize sees 18, the CPU backend's among them.
		waits, err = a.placeBackend(dev, f, backend, "synchronize", "P12ggml_backend", a.progs.SyncEnter, a.progs.SyncExit, symbols.Arg1)
	}
	if waits == nil && err == nil && !a.waitsAll {
		a.waitsAll = true
		waits, err = a.attach(func(s spec) bool { return s.group == device })
	}
	a.links = append(a.links, waits...)
	if f != nil {
		var queued Links
		queued, queuedErr = a.placeBackend(dev, f, backend, "cpy_tensor_async", "P12ggml_backendS0_PK11ggml_tensorPS1_",
			a.progs.CopyAsyncEnter, a.progs.CopyAsyncExit, symbols.Arg3|symbols.Arg4)
		a.links = append(a.links, queued...)
		if backend == backends.Vulkan {
			loggerErr = a.attachLogger(dev, f)
		}
	}
	return errors.Join(err, queuedErr, loggerErr)
}

// placeBackend probes the backend's implementation of one of its interface's functions,
// ggml_backend_<backend>_<fn>, in dev (parsed as f), at its entry and return: a static
// function, found beside the backend's own get_name symbol. A C++ backend's name is
// mangled, params being the parameters' mangling every backend shares. Nil, nil where
// the backend has none: its interface leaves that function out.
func (a *Attachment) placeBackend(dev *discover.Module, f *symbols.File, backend, fn, params string, enter, exit *ebpf.Program, keep symbols.Regs) (Links, error) {
	name := "ggml_backend_" + strings.ToLower(backend) + "_" + fn
	for _, n := range backendSymbols(name, params) {
		sym, ok := f.Symbol(n)
		if !ok {
			continue
		}
		in, err := a.placeAt(dev, f, sym, enter, false, keep, name)
		if err != nil {
			return nil, err
		}
		out, err := a.placeAt(dev, f, sym, exit, true, 0, name)
		if err != nil {
			in.Close()
			return nil, err
		}
		return Links{in, out}, nil
	}
	return nil, nil
}

// backendSymbols are the symbols a backend's static function name may have: mangled
// (C++, with params), or plain (C).
func backendSymbols(name, params string) []string {
	return []string{fmt.Sprintf("_ZL%d%s%s", len(name), name, params), name}
}

// always says whether the probes of group g stay for the life of the process.
func (a *Attachment) always(g group) bool {
	return g == app && a.layers.Application || g == graph && a.layers.Runtime
}

// Extend adds what process p, as inspected again, maps and the attachment lacks: an
// object that plays a role none did when it was made, such as libllama loaded with
// dlopen by a binding after profinfer attached. It attaches that object's lasting
// probes and returns the roles added; node probes on it come with the next AttachNodes.
func (a *Attachment) Extend(p *discover.Process) ([]discover.Role, error) {
	var added []discover.Role
	for r, m := range p.Modules {
		if m != nil && a.proc.Modules[r] == nil {
			a.proc.Modules[r] = m
			added = append(added, discover.Role(r))
		}
	}
	if len(added) == 0 {
		return nil, nil
	}
	links, err := a.attach(func(s spec) bool { return a.always(s.group) && slices.Contains(added, s.role) })
	a.links = append(a.links, links...)
	for g := range a.extra {
		more, gerr := a.attach(func(s spec) bool { return s.group == g && slices.Contains(added, s.role) })
		a.extra[g] = append(a.extra[g], more...)
		err = errors.Join(err, gerr)
	}
	return added, err
}

// SeesBuilds says whether graph builds are probed, which Remember needs.
func (a *Attachment) SeesBuilds() bool { return a.builds }

// NodesAttached says whether the node probes are in place.
func (a *Attachment) NodesAttached() bool { return len(a.nodes) > 0 }

// DetachNodes takes the node probes out of the attachment and returns them, for the
// caller to close: closing a uprobe waits for the kernel's grace periods (about 0.3 s
// for the node probes here), which a caller on a hot path does elsewhere. Until then
// they still fire.
func (a *Attachment) DetachNodes() Links {
	l := a.nodes
	a.nodes = nil
	return l
}

// Links are probes to close, or to let go of where the pool holds them.
type Links []io.Closer

// Close closes every link, all at once. Removing a perf-event uprobe holds the uprobe's
// lock across RCU grace periods, and every thread that hits it meanwhile waits: closed
// together, the node probes' waits overlap instead of adding up.
func (l Links) Close() error {
	errs := make([]error, len(l))
	var wg sync.WaitGroup
	for i, link := range l {
		wg.Go(func() { errs[i] = link.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (a *Attachment) attach(want func(spec) bool) (Links, error) {
	var (
		links   Links
		errs    []error
		missing = map[string][]string{} // by object: the symbols it lacks
	)
	for _, s := range specs {
		if !want(s) {
			continue
		}
		l, err := a.place(s)
		var ms *missingSymbol
		switch {
		case errors.As(err, &ms):
			if !slices.Contains(missing[ms.path], ms.symbol) {
				missing[ms.path] = append(missing[ms.path], ms.symbol)
			}
		case err != nil:
			errs = append(errs, err)
		}
		if l != nil {
			links = append(links, l)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(missing)) {
		var names, lost []string
		for _, sym := range missing[path] {
			lost = append(lost, loses[sym])
			if c, ok := choices[sym]; ok {
				sym = strings.Join(c, " and ")
			}
			names = append(names, sym)
		}
		errs = append(errs, fmt.Errorf("%s lacks %s (stripped?): no %s", path,
			strings.Join(names, ", "), strings.Join(lost, ", ")))
	}
	return links, errors.Join(errs...)
}

// place attaches one probe: a lasting one held in the pool, the others for the process
// alone. It returns nil, nil for a probe that does not apply.
func (a *Attachment) place(s spec) (io.Closer, error) {
	m := a.proc.Module(s.role)
	if m == nil {
		if s.role != discover.Base && s.role != discover.CPU {
			return nil, nil // an application layer of another runtime
		}
		return nil, fmt.Errorf("pid %d maps no %s", a.PID, s.role)
	}
	f, err := a.open(m)
	if err != nil {
		return nil, err
	}
	lookup := f.Function
	if _, ok := choices[s.symbol]; ok {
		lookup = func(name string) (symbols.Symbol, bool) { return choose(f, name) }
	}
	sym, ok := lookup(s.symbol)
	if !ok {
		if s.optional {
			return nil, nil
		}
		return nil, &missingSymbol{m.Path, s.symbol}
	}
	prog, keep := s.prog(a.progs), s.keep
	if sym.Name == decodeMethod && !s.ret { // the batch by reference
		prog, keep = a.progs.DecodeMethodEnter, symbols.Arg1|symbols.Arg2
	}
	var l io.Closer
	if a.always(s.group) {
		l, err = a.hold(m, f, sym, prog, s.ret, keep, s.symbol)
	} else {
		l, err = a.placeAt(m, f, sym, prog, s.ret, keep, s.symbol)
	}
	a.builds = a.builds || l != nil && s.symbol == buildSymbol
	a.scheds = a.scheds || l != nil && s.symbol == schedSymbol
	return l, err
}

// hold is placeAt for a lasting probe: the pool's, for every process that maps m's file.
func (a *Attachment) hold(m *discover.Module, f *symbols.File, sym symbols.Symbol, prog *ebpf.Program, ret bool, keep symbols.Regs, key string) (io.Closer, error) {
	at, err := f.FileOffset(sym.Value)
	if err != nil {
		return nil, err
	}
	h, emulated, err := a.pool.hold(placement{m.Dev, m.Inode, at, ret}, func() (link.Link, bool, error) {
		return a.place1(m, f, sym, prog, ret, keep, 0)
	})
	if emulated {
		a.emulated[key] = true
	}
	return h, err
}

// placeAt attaches prog to sym of object m, parsed as f, for the process alone: at its
// return (ret), or at its entry, on the first instruction from which the registers in
// keep are intact. key names the probe where it sits on an emulated instruction.
func (a *Attachment) placeAt(m *discover.Module, f *symbols.File, sym symbols.Symbol, prog *ebpf.Program, ret bool, keep symbols.Regs, key string) (link.Link, error) {
	l, emulated, err := a.place1(m, f, sym, prog, ret, keep, uint32(a.PID))
	if emulated {
		a.emulated[key] = true
	}
	return l, err
}

// place1 attaches prog as placeAt does, for process pid, or every process (0).
func (a *Attachment) place1(m *discover.Module, f *symbols.File, sym symbols.Symbol, prog *ebpf.Program, ret bool, keep symbols.Regs, pid uint32) (link.Link, bool, error) {
	var err error
	ex := a.exes[m]
	if ex == nil {
		if ex, err = link.OpenExecutable(m.HostPath); err != nil {
			return nil, false, fmt.Errorf("opening %s: %w", m.Path, err)
		}
		a.exes[m] = ex
	}
	var (
		l        link.Link
		off      uint64
		emulated bool
	)
	if !ret {
		if off, emulated, err = f.ProbeOffset(sym, keep); err != nil {
			return nil, false, err
		}
	}
	// The address from the symbols already read, so that the link package does not read
	// the file's symbol tables again for every process: some 12 ms a process.
	at, err := f.FileOffset(sym.Value)
	if err != nil {
		return nil, false, err
	}
	switch {
	case a.multi && ret:
		l, err = ex.UretprobeMulti([]string{sym.Name}, prog, &link.UprobeMultiOptions{PID: pid, Addresses: []uint64{at}})
	case a.multi:
		l, err = ex.UprobeMulti([]string{sym.Name}, prog, &link.UprobeMultiOptions{PID: pid, Addresses: []uint64{at}, Offsets: []uint64{off}})
	case ret:
		l, err = ex.Uretprobe(sym.Name, prog, &link.UprobeOptions{PID: int(pid), Address: at})
	default:
		l, err = ex.Uprobe(sym.Name, prog, &link.UprobeOptions{PID: int(pid), Address: at, Offset: off})
	}
	if err != nil {
		return nil, false, fmt.Errorf("attaching to %s in %s: %w", sym.Name, m.Path, err)
	}
	return l, emulated, nil
}

// Close detaches the process's own probes and lets go of those the pool holds for it.
func (a *Attachment) Close() error {
	errs := []error{closeAll(a.links), closeAll(a.nodes)}
	for g, l := range a.extra {
		errs = append(errs, closeAll(l))
		delete(a.extra, g)
	}
	a.links, a.nodes = nil, nil
	return errors.Join(errs...)
}

func closeAll[C io.Closer](links []C) error {
	var errs []error
	for _, l := range links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}
