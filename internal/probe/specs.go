package probe

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/profinfer/profinfer/bpf"
	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/symbols"
)

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
