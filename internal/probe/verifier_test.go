//go:build e2e

package probe

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/profinfer/profinfer/bpf"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/testbench"
)

// The running kernel's verifier accepts every program it is to run: as the profiler loads
// them, under the constants that change which code it walks, as perf-event and as
// uprobe_multi programs where it has those, and for every layout. The fallbacks load on
// every kernel; a variant's own program is refused exactly where the kernel lacks its
// feature, so the feature probes choose right. The kernel matrix (internal/vm) runs this
// test in each kernel it boots.
func TestE2EVerifier(t *testing.T) {
	k := probeKernel(t)
	t.Logf("Linux %s: bpf_loop %v, sched_switch prev_state %v, uprobe_multi %v", k.Release, k.Loop, k.PrevState, k.UprobeMulti)
	types := btf.NewCache() // as a start shares it
	configs := []LoadConfig{
		{RingBufferSize: 1 << 20},
		{RingBufferSize: 1 << 20, AllThreads: true, FollowSched: true, AllTraced: true, Counters: 8},
	}
	for _, multi := range []bool{false, true} {
		if multi && !k.UprobeMulti {
			continue
		}
		for i, cfg := range configs {
			kk := k
			kk.UprobeMulti = multi
			l, err := Load(cfg, kk, types)
			if err != nil {
				t.Fatalf("uprobe_multi %v, %+v: %v", multi, cfg, err)
			}
			// Other layouts change offsets, not code: once is enough.
			for _, layout := range ggml.Layouts[1:] {
				if _, err := l.Programs.For(layout); err != nil && i == 0 {
					t.Error(err)
				}
			}
			l.Close()
		}
	}
	// Each variant and its fallback, alone.
	spec := loadSpec(t, configs[0], ggml.Layouts[0])
	var maps bpf.ProfinferMaps
	if err := spec.LoadAndAssign(&maps, nil); err != nil {
		t.Fatal(loadError(k, err))
	}
	defer maps.Close()
	shared := newPrograms(spec, k, &maps).maps
	for _, v := range variants {
		for _, name := range []string{v.program, v.fallback} {
			one := spec.Copy()
			for other := range one.Programs {
				if other != name {
					delete(one.Programs, other)
				}
			}
			coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: shared})
			runs := name == v.fallback || v.runs(k)
			switch {
			case err == nil && !runs:
				t.Errorf("%s loads, though the feature probes say this kernel cannot run it", name)
			case err != nil && runs:
				t.Errorf("%s: %v", name, loadError(k, err))
			case err != nil:
				t.Logf("%s refused, as it must be: %v", name, loadError(k, err))
			}
			if coll != nil {
				coll.Close()
			}
		}
	}
}

// loadSpec is the programs' spec with every constant Load sets.
func loadSpec(t *testing.T, cfg LoadConfig, layout ggml.Layout) *ebpf.CollectionSpec {
	t.Helper()
	spec, err := bpf.LoadProfinfer()
	if err != nil {
		t.Fatal(err)
	}
	spec.Maps[bpf.ProfinferMapEvents].MaxEntries = uint32(cfg.RingBufferSize)
	if err := setLayout(spec, layout); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"all_threads": boolByte(cfg.AllThreads),
		"follow_sched": boolByte(cfg.FollowSched), "all_traced": boolByte(cfg.AllTraced), "n_counters": uint32(cfg.Counters)} {
		if err := spec.Variables[name].Set(v); err != nil {
			t.Fatal(err)
		}
	}
	return spec
}

// A verifier rejection names the program and the kernel, and never blames privileges.
func TestE2EVerifierErrorNamesTheProgram(t *testing.T) {
	k := probeKernel(t)
	spec, err := bpf.LoadProfinfer()
	if err != nil {
		t.Fatal(err)
	}
	// Every real program passes, so break one: cut it before its exit.
	prog := spec.Programs["graph_new"]
	prog.Instructions = append(prog.Instructions[:0:0], prog.Instructions...)
	for i := range prog.Instructions {
		if prog.Instructions[i].OpCode.JumpOp().String() == "Exit" {
			prog.Instructions = prog.Instructions[:i]
			break
		}
	}
	_, err = ebpf.NewCollection(&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"graph_new": prog}, Maps: spec.Maps})
	if err == nil {
		t.Fatal("a program without exit was loaded")
	}
	msg := loadError(k, err).Error()
	for _, want := range []string{"the verifier of Linux " + k.Release + " rejected eBPF program graph_new"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "needs root") {
		t.Errorf("%q blames privileges", msg)
	}
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Errorf("not a verifier error: %v", err)
	}
}

// probeKernel is the running kernel's features, as root.
func probeKernel(t *testing.T) Kernel {
	t.Helper()
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root, to load eBPF programs")
	}
	k, err := ProbeKernel(btf.NewCache())
	if err != nil {
		t.Fatal(err)
	}
	return k
}
