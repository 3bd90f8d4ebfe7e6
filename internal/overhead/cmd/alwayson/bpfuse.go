package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/profinfer/profinfer/internal/overhead"
)

// bpfUse is what the kernel's BPF statistics say of the uprobe programs that ran.
type bpfUse struct {
	hits, retHits float64 // entry and return probe hits
	ns            float64 // program run time
	progs         map[string]progUse
}

// progUse is one program's runs and run time.
type progUse struct{ runs, ns float64 }

// Per-hit trap costs beyond the program, measured on these machines from a C loop (the
// project's BRIEF): an emulated uprobe about 1.1 µs, a return probe 0.5 µs more.
const (
	trapCost    = 1.1e-6
	retTrapCost = 0.5e-6
)

func (b bpfUse) trap() float64 { return (b.hits+b.retHits)*trapCost + b.retHits*retTrapCost }

func (b bpfUse) minus(o bpfUse) bpfUse {
	d := bpfUse{b.hits - o.hits, b.retHits - o.retHits, b.ns - o.ns, map[string]progUse{}}
	for name, p := range b.progs {
		d.progs[name] = progUse{p.runs - o.progs[name].runs, p.ns - o.progs[name].ns}
	}
	return d
}

// uprobeStats sums the statistics of every loaded uprobe program (kernel.bpf_stats_enabled
// must be 1). Return probes are the programs named *_exit, as the collector names them.
func uprobeStats() (bpfUse, error) {
	u := bpfUse{progs: map[string]progUse{}}
	ps, err := overhead.Programs()
	for _, p := range ps {
		if p.Type != ebpf.Kprobe {
			continue
		}
		runs, ns := float64(p.Runs), float64(p.Runtime.Nanoseconds())
		if strings.HasSuffix(p.Name, "_exit") {
			u.retHits += runs
		} else {
			u.hits += runs
		}
		u.ns += ns
		pu := u.progs[p.Name]
		u.progs[p.Name] = progUse{pu.runs + runs, pu.ns + ns}
	}
	return u, err
}

// programTable is each program's hits a unit (token, transcription) and run time a hit,
// over the arms.
func programTable(as []arm, unit string) string {
	total, tokens := map[string]progUse{}, 0
	for _, a := range as {
		tokens += a.tokens
		for name, p := range a.bpf.progs {
			t := total[name]
			total[name] = progUse{t.runs + p.runs, t.ns + p.ns}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| program | hits a %s | ns a hit | µs a %s |\n|---|---:|---:|---:|\n", unit, unit)
	for _, name := range slices.Sorted(maps.Keys(total)) {
		if p := total[name]; p.runs > 0 {
			fmt.Fprintf(&b, "| %s | %.2f | %.0f | %.2f |\n", name, p.runs/float64(tokens), p.ns/p.runs, p.ns/1e3/float64(tokens))
		}
	}
	return b.String()
}
