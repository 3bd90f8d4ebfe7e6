package probe

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/profinfer/profinfer/bpf"
	"github.com/profinfer/profinfer/internal/ggml"
)

// LoadConfig is what the programs are loaded with, besides the struct layout.
type LoadConfig struct {
	RingBufferSize int
	AllThreads     bool // node starts of threads other than 0 are recorded (all_threads)
	FollowSched    bool // the scheduler programs are attached (follow_sched)
	// AllTraced traces every graph (all_traced), not only those a sampling window does:
	// each sums its threads' CPU time, and a device's splits have their nodes read.
	AllTraced bool
	Counters  int // perf counters read per thread; 0 compiles the reads out
}

// Loaded are profinfer's eBPF objects in the kernel: every map, the programs for the first
// known struct layout, and those of other layouts as targets need them.
type Loaded struct {
	bpf.ProfinferMaps
	bpf.ProfinferPrograms
	Programs *Programs
	Kernel   Kernel
}

// Multi says whether uprobe programs are uprobe_multi programs (PrepareMulti).
func (l *Loaded) Multi() bool { return l.Kernel.UprobeMulti }

// Load loads the programs the kernel k runs, with every constant they read set: the first
// known layout's offsets, and cfg; types holds the kernel's BTF. With counters, Counters
// is the perf event array of CounterMap.
func Load(cfg LoadConfig, k Kernel, types *btf.Cache) (*Loaded, error) {
	// Kernels since 5.11 charge BPF memory to the cgroup; raising the limit is only needed
	// (and only possible) on older ones.
	if err := rlimit.RemoveMemlock(); err != nil {
		k.memlock = err
	}
	spec, err := bpf.LoadProfinfer()
	if err != nil {
		return nil, fmt.Errorf("reading the eBPF object: %w", err)
	}
	spec.Maps[bpf.ProfinferMapEvents].MaxEntries = uint32(cfg.RingBufferSize)
	if err := setLayout(spec, ggml.Layouts[0]); err != nil {
		return nil, err
	}
	consts := map[string]any{
		// Unread bytes from which a record wakes the reader.
		"wakeup_bytes": uint64(cfg.RingBufferSize / 4),
		"all_threads":  boolByte(cfg.AllThreads),
		"follow_sched": boolByte(cfg.FollowSched),
		"all_traced":   boolByte(cfg.AllTraced),
		"n_counters":   uint32(cfg.Counters),
		// llama_batch is llama's, not ggml's: one layout for every release.
		"batch_stack_off":    uint32(ggml.LlamaBatch.Stack),
		"batch_token_off":    uint32(ggml.LlamaBatch.Token),
		"batch_pos_off":      uint32(ggml.LlamaBatch.Pos),
		"batch_n_seq_id_off": uint32(ggml.LlamaBatch.NSeqID),
		"batch_seq_id_off":   uint32(ggml.LlamaBatch.SeqID),
		"batch_logits_off":   uint32(ggml.LlamaBatch.Logits),
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	if k.UprobeMulti {
		PrepareMulti(spec)
	}
	l := &Loaded{Kernel: k}
	var ctrMap *ebpf.Map
	if cfg.Counters > 0 {
		if ctrMap, err = CounterMap(spec); err != nil {
			return nil, err
		}
	}
	if err := spec.LoadAndAssign(&l.ProfinferMaps, nil); err != nil {
		if ctrMap != nil {
			ctrMap.Close()
		}
		return nil, loadError(k, err)
	}
	if ctrMap != nil {
		// The programs use ctrMap; the one the collection made for them goes unused.
		l.Counters.Close()
		l.Counters = ctrMap
	}
	l.Programs = newPrograms(spec, k, &l.ProfinferMaps)
	progs, err := l.Programs.load(ggml.Layouts[0], types)
	if err != nil {
		l.ProfinferMaps.Close()
		return nil, err
	}
	l.ProfinferPrograms = *progs
	return l, nil
}

// Close closes the programs of every layout and the maps.
func (l *Loaded) Close() error {
	l.Programs.Close()
	return l.ProfinferMaps.Close()
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
