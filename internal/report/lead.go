package report

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/summary"
)

// maxLeadOps bounds the ops named on each backend's line.
const maxLeadOps = 6

// lead prints, for a process that offloads, where a token's time went backend by
// backend and what each computed: the report opens with it.
func lead(w io.Writer, p *summary.Process) {
	l := summary.LeadOf(p)
	if l == nil {
		return
	}
	var phases []string
	for _, ph := range p.Phases {
		if ph.Decodes > 0 {
			phases = append(phases, ph.Name)
		}
	}
	fmt.Fprintf(w, "\nwhere a %s's time went, by backend: ms a %s, over %d %ss in %d %s (%s)\n",
		l.Unit, l.Unit, l.Per, l.Unit, l.Steps, summary.Steps(p.Runtime), strings.Join(phases, " and "))
	fmt.Fprintln(w, "backend\tshare\tCPU computing\tCPU handing over\tcopies\tdevice, at most\tCPU waiting\tsplits\t")
	for _, t := range l.Parts {
		fmt.Fprintf(w, "%s\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%d\t\n", Text(summary.BackendName(t.Backend)), 100*t.Share,
			ms(t.Compute), ms(t.HandOver), ms(t.Copies), ms(t.Device), ms(t.Wait), t.Splits)
	}
	for _, t := range l.Parts {
		name := Text(summary.BackendName(t.Backend))
		if t.Backend == "CPU" {
			for _, ph := range p.Phases {
				if len(ph.Ops) > 0 {
					fmt.Fprintf(w, "on the CPU, %s: %s of its graph time\n", ph.Name, cpuOps(ph))
				}
			}
			continue
		}
		if i := slices.IndexFunc(p.Backends, func(b summary.Backend) bool { return b.Backend == t.Backend }); i >= 0 && len(p.Backends[i].Ops) > 0 {
			fmt.Fprintf(w, "on %s: %s\n", name, deviceOps(p.Backends[i]))
		} else {
			fmt.Fprintf(w, "on %s: no node read from its splits\n", name)
		}
		switch {
		case t.SeenDone > 0:
			fmt.Fprint(w, "  its device time runs from each handing over until the CPU saw the work done, the CPU's wait included: the device's own is at most that")
			if t.SeenDone < t.Splits {
				fmt.Fprintf(w, "; the mean of the %d of %d splits seen done", t.SeenDone, t.Splits)
			}
			fmt.Fprintln(w)
		case t.Splits > 0:
			fmt.Fprintln(w, "  no split seen done: its part is the CPU's handing the work over alone")
		}
		if t.CopyBytes > 0 {
			fmt.Fprintf(w, "  copies to and from it: %s a %s\n", si(t.CopyBytes, "B"), l.Unit)
		}
	}
}

// ms shows seconds a token as milliseconds; a dash where there are none.
func ms(s float64) string {
	if s == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", s*1e3)
}

// cpuOps names a phase's largest ops on the CPU with their shares.
func cpuOps(ph *summary.Phase) string {
	var out []string
	for _, o := range ph.Ops[:min(maxLeadOps, len(ph.Ops))] {
		name := Text(o.Op)
		if o.Weight != "none" {
			name += " " + Text(o.Weight)
		}
		out = append(out, fmt.Sprintf("%s %.1f%%", name, 100*o.Share))
	}
	return strings.Join(out, ", ")
}

// deviceOps names the ops read from a device's splits: by the device's own time where
// it timed them, else by nodes.
func deviceOps(b summary.Backend) string {
	ops := slices.Collect(maps.Keys(b.Ops))
	slices.SortFunc(ops, func(x, y string) int {
		return cmp.Or(cmp.Compare(b.OpSeconds[y], b.OpSeconds[x]), cmp.Compare(b.Ops[y], b.Ops[x]), strings.Compare(x, y))
	})
	var timed float64
	for _, s := range b.OpSeconds {
		timed += s
	}
	out := make([]string, 0, maxLeadOps+1)
	for _, op := range ops[:min(maxLeadOps, len(ops))] {
		if s, ok := b.OpSeconds[op]; ok && timed > 0 {
			out = append(out, fmt.Sprintf("%s %.1f%% (%d nodes)", Text(op), 100*s/timed, b.Ops[op]))
		} else {
			out = append(out, fmt.Sprintf("%s %d nodes", Text(op), b.Ops[op]))
		}
	}
	if more := len(ops) - len(out); more > 0 {
		out = append(out, fmt.Sprintf("%d more", more))
	}
	if timed > 0 {
		return strings.Join(out, ", ") + " of the time the device timed"
	}
	return strings.Join(out, ", ") + ", read from its splits (the device timed none of them)"
}
