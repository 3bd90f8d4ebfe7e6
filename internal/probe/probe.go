// Package probe attaches profinfer's eBPF programs to the GGML code of the traced
// processes and owns the resulting links: the lasting probes once per file (Pool), the
// node and device probes per process. Each probe sits on the first instruction of its
// function that the kernel emulates, so a hit costs about 1 µs instead of a 12 µs
// single-step.
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

// Layers selects which probes to attach.
type Layers struct {
	Application bool // llama_decode, whisper_full_with_state, and steps (AttachSteps)
	Runtime     bool // graphs: the backend scheduler's and the CPU backend's
	Barriers    bool // with the node probes, ggml_barrier: per-thread busy time
	Scheduler   bool // sched_switch and sched_wakeup, for the traced processes' threads
	Counters    bool // with the node probes, each thread's graph exit: perf counters per node
}

// PrepareMulti makes spec's uprobe programs uprobe_multi programs, for kernels with
// uprobe_multi links (Linux 6.6). Closing a perf-event uprobe that a thread is hitting
// blocks that thread: its handler asks to remove the breakpoint and waits on the uprobe's
// lock, which the closer holds across an RCU grace period. With a uprobe_multi link the
// consumer is gone before that, so the thread runs on. The node probes come and go with
// every sampling window while the model runs through them.
func PrepareMulti(spec *ebpf.CollectionSpec) {
	for _, p := range spec.Programs {
		if strings.HasPrefix(p.SectionName, "uprobe/") || strings.HasPrefix(p.SectionName, "uretprobe/") {
			p.AttachType = ebpf.AttachTraceUprobeMulti
		}
	}
}

// Tracepoints attaches the tracepoint programs the layers need, which serve every traced
// process; the processes are chosen by Trace. Scheduler: sched_switch and sched_wakeup.
// Counters: thread starts, so that a new thread's counters open before it computes.
func Tracepoints(progs *bpf.ProfinferPrograms, l Layers) ([]link.Link, error) {
	type tracepoint struct {
		name string
		prog *ebpf.Program
	}
	var want []tracepoint
	if l.Scheduler {
		want = append(want, tracepoint{"sched_switch", progs.SchedSwitch}, tracepoint{"sched_wakeup", progs.SchedWakeup})
	}
	if l.Counters {
		want = append(want, tracepoint{"sched_process_fork", progs.ThreadStart})
	}
	var links []link.Link
	for _, tp := range want {
		lk, err := link.AttachTracing(link.TracingOptions{Program: tp.prog})
		if err != nil {
			closeAll(links)
			return nil, fmt.Errorf("attaching to tracepoint %s: %w", tp.name, err)
		}
		links = append(links, lk)
	}
	return links, nil
}

// Trace adds process pid to the traced processes, whose lasting probes report (see
// Pool), whose threads the scheduler programs follow, whose exit the process hooks report
// and whose lost records are counted, or removes it.
func Trace(maps *bpf.ProfinferMaps, pid int, on bool) error {
	key := uint32(pid)
	if on {
		return errors.Join(maps.Traced.Put(key, uint32(0)), maps.Lost.Put(key, uint64(0)))
	}
	err := maps.Remember.Delete(key)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		err = nil
	}
	return errors.Join(maps.Traced.Delete(key), maps.Lost.Delete(key), err)
}

// Remember lets the node programs send each node's detail of process pid once per graph
// build instead of at every node start, from now on (now is CLOCK_MONOTONIC in ns); the
// build probe (see SeesBuilds) must be attached. Calling it again has every detail sent
// again.
func Remember(maps *bpf.ProfinferMaps, pid int, now uint64) error {
	// A new stamp forgets what was sent to a process that had pid before, or before now.
	return errors.Join(maps.Built.Put(uint32(0), now), maps.Remember.Put(uint32(pid), uint8(1)))
}

// Window tells the programs that a sampling window on traced process pid lasts for
// graphs more graph computations, the end of the last of which wakes the reader to close
// it (and so does every graph or decode end after it, until the reader does); 0 means no
// window is open.
func Window(maps *bpf.ProfinferMaps, pid, graphs int) error {
	return maps.Traced.Update(uint32(pid), uint32(graphs), ebpf.UpdateExist)
}

// group says when a probe is attached: with the process, or only while nodes are traced.
type group int

const (
	app       group = iota // Layers.Application
	graph                  // Layers.Runtime
	node                   // AttachNodes
	barrier                // AttachNodes, with Layers.Barriers
	counted                // AttachNodes, with Layers.Counters
	device                 // AttachDevice, where the backend has no synchronize of its own
	split                  // AttachSplits: with Layers.Runtime, where the scheduler has a backend besides the CPU's
	schedRead              // AttachSchedRead: with Layers.Runtime, until a scheduler's backends are read
	step                   // AttachSteps: with Layers.Application, where the runtime's unit of work is a scheduler's computation
)

// spec is one probe: a program on a symbol of the object that plays role.
type spec struct {
	group    group
	role     discover.Role
	symbol   string
	prog     func(*bpf.ProfinferPrograms) *ebpf.Program
	ret      bool
	keep     symbols.Regs // registers the program reads, which skipped instructions must not change
	optional bool         // absent in some ggml versions
}

type progs = bpf.ProfinferPrograms

var specs = []spec{
	// The memory calls before llama_decode: a decode seen means its request's boundaries
	// are seen too, even while a process is attached to mid-run.
	{app, discover.Llama, seqRmSymbol, func(p *progs) *ebpf.Program { return p.SeqRm }, false, symbols.Arg2 | symbols.Arg3 | symbols.Arg4, false},
	{app, discover.Llama, clearSymbol, func(p *progs) *ebpf.Program { return p.SeqClear }, false, 0, false},
	{app, discover.Llama, cacheSeqRm, func(p *progs) *ebpf.Program { return p.SeqRm }, false, symbols.Arg2 | symbols.Arg3 | symbols.Arg4, true},
	{app, discover.Llama, recurrentSeqRm, func(p *progs) *ebpf.Program { return p.SeqRm }, false, symbols.Arg2 | symbols.Arg3 | symbols.Arg4, true},
	{app, discover.Llama, cacheClear, func(p *progs) *ebpf.Program { return p.SeqClear }, false, 0, true},
	{app, discover.Llama, recurrentClear, func(p *progs) *ebpf.Program { return p.SeqClear }, false, 0, true},
	{app, discover.Llama, decodeSymbol, func(p *progs) *ebpf.Program { return p.DecodeEnter }, false, symbols.Arg1 | symbols.Arg2Struct, false},
	{app, discover.Llama, decodeSymbol, func(p *progs) *ebpf.Program { return p.DecodeExit }, true, 0, false},
	// whisper.cpp's transcription: the samples are the fourth argument on x86-64, the
	// fifth on arm64, where the parameters struct before them is passed by pointer.
	{app, discover.Whisper, "whisper_full_with_state", func(p *progs) *ebpf.Program { return p.JobEnter }, false, symbols.Arg1 | symbols.Arg4 | symbols.Arg5, false},
	{app, discover.Whisper, "whisper_full_with_state", func(p *progs) *ebpf.Program { return p.JobExit }, true, 0, false},
	{step, discover.Base, "ggml_backend_sched_graph_compute_async", func(p *progs) *ebpf.Program { return p.StepEnter }, false, symbols.Arg1 | symbols.Arg2, false},
	{step, discover.Base, "ggml_backend_sched_graph_compute_async", func(p *progs) *ebpf.Program { return p.StepExit }, true, 0, false},
	{graph, discover.Base, schedSymbol, func(p *progs) *ebpf.Program { return p.SchedNew }, false, symbols.Arg3, true},
	{split, discover.Base, "ggml_backend_graph_compute_async", func(p *progs) *ebpf.Program { return p.SplitEnter }, false, symbols.Arg1 | symbols.Arg2, false},
	{split, discover.Base, "ggml_backend_graph_compute_async", func(p *progs) *ebpf.Program { return p.SplitExit }, true, 0, false},
	{schedRead, discover.Base, "ggml_backend_sched_graph_compute_async", func(p *progs) *ebpf.Program { return p.SchedRead }, false, symbols.Arg1, false},
	{graph, discover.Base, "ggml_backend_tensor_copy", func(p *progs) *ebpf.Program { return p.CopyEnter }, false, symbols.Arg1 | symbols.Arg2, false},
	{graph, discover.Base, "ggml_backend_tensor_copy", func(p *progs) *ebpf.Program { return p.CopyExit }, true, 0, false},
	{device, discover.Base, "ggml_backend_synchronize", func(p *progs) *ebpf.Program { return p.SyncEnter }, false, symbols.Arg1, false},
	{device, discover.Base, "ggml_backend_synchronize", func(p *progs) *ebpf.Program { return p.SyncExit }, true, 0, false},
	{graph, discover.Base, buildSymbol, func(p *progs) *ebpf.Program { return p.GraphNew }, false, 0, true},
	{graph, discover.CPU, "ggml_graph_compute", func(p *progs) *ebpf.Program { return p.GraphEnter }, false, symbols.Arg1 | symbols.Arg2, false},
	{graph, discover.CPU, "ggml_graph_compute", func(p *progs) *ebpf.Program { return p.GraphExit }, true, 0, false},
	{node, discover.CPU, nodeSymbol, func(p *progs) *ebpf.Program { return p.NodeEnter }, false, symbols.Arg1 | symbols.Arg2, false},
	{node, discover.CPU, "ggml_compute_forward_rms_norm_mul_fused", func(p *progs) *ebpf.Program { return p.FusedEnter }, false, symbols.Arg1 | symbols.Arg2 | symbols.Arg3, true},
	{barrier, discover.CPU, "ggml_barrier", func(p *progs) *ebpf.Program { return p.BarrierEnter }, false, 0, false},
	{counted, discover.CPU, "ggml_graph_compute_thread", func(p *progs) *ebpf.Program { return p.ThreadExit }, true, 0, false},
}

// NodeSymbols are the node probe points, best first; each is called as f(params, tensor)
// for every node on every thread. ggml_cpu_extra_compute_forward is called first thing by
// the dispatcher from late 2024 on; before, the dispatcher ggml_compute_forward itself is
// the probe point, a local symbol.
var NodeSymbols = []string{"ggml_cpu_extra_compute_forward", "ggml_compute_forward"}

// nodeSymbol, decodeSymbol, seqRmSymbol and clearSymbol stand for the first of their
// choices that an object defines.
const (
	nodeSymbol   = "(node)"
	decodeSymbol = "(decode)"
	seqRmSymbol  = "(seq_rm)"
	clearSymbol  = "(clear)"
)

// The memories' own seq_rm(seq, p0, p1) and clear(data), which llama_memory_seq_rm and
// llama_memory_clear call through the vtable: an addon that inlined those wrappers into
// its callers (@fugood/llama.node) runs only these. Every composite memory (iswa, hybrid)
// ends in the key-value cache's or the recurrent state's. Where a wrapper runs too, one
// removal is seen twice, which marks the same boundary.
const (
	cacheSeqRm     = "(cache seq_rm)"
	recurrentSeqRm = "(recurrent seq_rm)"
	cacheClear     = "(cache clear)"
	recurrentClear = "(recurrent clear)"
)

// decodeMethod is llama_context::decode(const llama_batch &), which llama_decode calls
// (from early 2025 on), and which a build that inlined llama_decode into its callers
// calls directly: @fugood/llama.node's addon never runs its exported llama_decode. It
// takes the batch by reference, where llama_decode takes it by value.
const decodeMethod = "_ZN13llama_context6decodeERK11llama_batch"

// choices are the symbols each stand-in may be, best first. The memory calls were
// renamed twice; the older names became wrappers that call the newer, so the newest an
// object has sees every call.
var choices = map[string][]string{
	nodeSymbol:   NodeSymbols,
	decodeSymbol: {decodeMethod, "llama_decode"},
	seqRmSymbol:  {"llama_memory_seq_rm", "llama_kv_self_seq_rm", "llama_kv_cache_seq_rm"},
	clearSymbol:  {"llama_memory_clear", "llama_kv_self_clear", "llama_kv_cache_clear"},
	// llama_kv_cache was llama_kv_cache_unified, and llama_memory_recurrent
	// llama_kv_cache_recurrent, in mid-2025.
	cacheSeqRm:     {"_ZN14llama_kv_cache6seq_rmEiii", "_ZN22llama_kv_cache_unified6seq_rmEiii"},
	recurrentSeqRm: {"_ZN22llama_memory_recurrent6seq_rmEiii", "_ZN24llama_kv_cache_recurrent6seq_rmEiii"},
	cacheClear:     {"_ZN14llama_kv_cache5clearEb", "_ZN22llama_kv_cache_unified5clearEb"},
	recurrentClear: {"_ZN22llama_memory_recurrent5clearEb", "_ZN24llama_kv_cache_recurrent5clearEb"},
}

// NodeSymbol returns the node probe point of CPU backend f.
func NodeSymbol(f *symbols.File) (symbols.Symbol, bool) { return choose(f, nodeSymbol) }

// choose returns the first of stand-in's choices that f defines.
func choose(f *symbols.File, standIn string) (symbols.Symbol, bool) {
	for _, name := range choices[standIn] {
		if s, ok := f.Function(name); ok {
			return s, true
		}
	}
	return symbols.Symbol{}, false
}

// buildSymbol is where a graph is built: once per build, not per token, where graphs are
// reused.
const buildSymbol = "ggml_new_graph_custom"

// schedSymbol is where a backend scheduler is made, once per context: it says whether the
// split probes are needed (AttachSplits).
const schedSymbol = "ggml_backend_sched_new"

// loses says what is not reported without each probed symbol.
var loses = map[string]string{
	decodeSymbol:                             "tokens or llama_decode spans",
	"whisper_full_with_state":                "whisper transcription spans",
	"ggml_backend_graph_compute_async":       "backend split spans",
	"ggml_backend_sched_graph_compute_async": "the backends of a scheduler made before profinfer came (the split probes stay)",
	"ggml_backend_tensor_copy":               "tensor copies",
	"ggml_backend_synchronize":               "when a GPU's split ends, and the CPU's wait for it",
	"ggml_graph_compute":                     "graph spans",
	nodeSymbol:                               "node spans or per-op metrics",
	seqRmSymbol:                              "request boundaries where a sequence is rewound",
	clearSymbol:                              "request boundaries where the cache is cleared",
	"ggml_barrier":                           "barrier waits",
	"ggml_graph_compute_thread":              "counts outside nodes",
}

// missingSymbol is a probed symbol an object lacks.
type missingSymbol struct{ path, symbol string }

func (m *missingSymbol) Error() string {
	return fmt.Sprintf("%s: symbol %s not found", m.path, m.symbol)
}

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
	multi    bool // uprobe_multi links, see PrepareMulti
	builds   bool // the build probe is attached
	scheds   bool // the scheduler probe is attached
	device   bool // the device probes are attached
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
		exes: map[*discover.Module]*link.Executable{}, emulated: map[string]bool{}, extra: map[group]Links{}}
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

// AttachDevice adds the probes that see a device's work: the CPU's waits for a backend,
// and the copies the device queues, probed in dev, the object holding the code of the
// backend named backend. They come only once a process computes a split on a backend
// other than the CPU's, and stay.
func (a *Attachment) AttachDevice(dev *discover.Module, backend string) error {
	if a.device || !a.layers.Runtime {
		return nil
	}
	a.device = true
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
	if waits == nil && err == nil {
		waits, err = a.attach(func(s spec) bool { return s.group == device })
	}
	a.links = append(a.links, waits...)
	if f != nil {
		var queued Links
		queued, queuedErr = a.placeBackend(dev, f, backend, "cpy_tensor_async", "P12ggml_backendS0_PK11ggml_tensorPS1_",
			a.progs.CopyAsyncEnter, a.progs.CopyAsyncExit, symbols.Arg3|symbols.Arg4)
		a.links = append(a.links, queued...)
		if backend == vulkan {
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
