package assemble

import (
	"github.com/profinfer/profinfer/internal/events"
)

// SplitEnter starts a backend's share of the open decode's graph; device says that
// the backend is not the CPU's.
func (a *Assembler) SplitEnter(pid, tid uint32, ts uint64, backend string, addr uint64, nodes int, device bool) {
	a.proc(pid).split = &Split{TID: tid, Backend: backend, BackendAddr: addr, NNodes: nodes, Start: ts, Device: device}
}

// SplitNode adds node i of the open split, read from its graph.
func (a *Assembler) SplitNode(pid, tid uint32, i int, info *NodeInfo) {
	s := a.proc(pid).split
	if s == nil || s.TID != tid || info == nil || i != len(s.Nodes) {
		return // a lost record leaves the list short, not misnumbered
	}
	s.Nodes = append(s.Nodes, info)
}

// TimedNode adds a node of the open split that the device times, filed under label.
func (a *Assembler) TimedNode(pid, tid uint32, label string, info *NodeInfo) {
	s := a.proc(pid).split
	if s == nil || s.TID != tid || info == nil {
		return
	}
	s.Timed = append(s.Timed, TimedNode{Info: info, Label: label})
}

// DeviceTimes gives the open split's nodes of label their times: the label holds held
// times, the newest of them those of the split's last nodes so labelled, in order; times
// are some of the newest events.TimesKept, from index first among them on.
func (a *Assembler) DeviceTimes(pid, tid uint32, label []byte, held, first int, times []uint64) {
	s := a.proc(pid).split
	if s == nil || s.TID != tid || len(s.Timed) == 0 {
		return
	}
	if s.labels == nil {
		s.labels = map[string][]int{}
		for i, n := range s.Timed {
			s.labels[n.Label] = append(s.labels[n.Label], i)
		}
	}
	nodes := s.labels[string(label)]
	// Time x (of held) is that of node x - (held - len(nodes)); earlier ones are earlier
	// graphs', where the logger prints less often than every graph.
	from := max(held-events.TimesKept, 0) + first - (held - len(nodes))
	for i, ns := range times {
		if j := from + i; j >= 0 && j < len(nodes) {
			n := &s.Timed[nodes[j]]
			n.NS, n.Known = ns, true
		}
	}
}

// backendWait is a wait of the CPU for one backend's queued work.
type backendWait struct {
	tid     uint32
	backend uint64
	start   uint64
}

// SyncEnter starts a wait of the CPU for backend's work.
func (a *Assembler) SyncEnter(pid, tid uint32, ts, backend uint64) {
	a.proc(pid).wait = &backendWait{tid: tid, backend: backend, start: ts}
}

// SyncExit ends the open wait: the backend's splits handed over before it are done.
func (a *Assembler) SyncExit(pid, tid uint32, ts uint64) {
	p := a.proc(pid)
	w := p.wait
	if w == nil || w.tid != tid {
		return
	}
	p.wait = nil
	var last *Split
	for _, d := range [...]*Step{p.held, p.decode} {
		if d == nil {
			continue
		}
		for i := range d.Splits {
			s := &d.Splits[i]
			if s.Device && s.Done == 0 && s.BackendAddr == w.backend && s.End <= w.start {
				s.Done, s.Bound = ts, true
				last = s
			}
		}
	}
	if last != nil {
		last.Wait = ts - w.start
		last.Bound = last.Wait < boundWait
	}
	if p.held != nil && !p.held.running() {
		a.sink.Step(p.held)
		p.held = nil
	}
}

// running says whether a device still computes one of d's splits, as far as seen.
func (d *Step) running() bool {
	for i := range d.Splits {
		if d.Splits[i].Device && d.Splits[i].Done == 0 {
			return true
		}
	}
	return false
}

// SplitExit finishes the open split, as part of the open decode.
func (a *Assembler) SplitExit(pid, tid uint32, ts uint64) {
	p := a.proc(pid)
	if s := p.split; s != nil && s.TID == tid {
		s.End = ts
		s.labels = nil
		p.split = nil
		if p.decode != nil {
			p.decode.Splits = append(p.decode.Splits, *s)
		}
	}
}

// CopyEnter starts a copy between backends; only those of a decode are kept.
func (a *Assembler) CopyEnter(pid uint32, ts uint64, c Copy) {
	c.Start = ts
	a.proc(pid).copy = &c
}

// CopyExit finishes the open copy, as part of the open decode; made says whether it was
// made or queued, rather than left to another copy.
func (a *Assembler) CopyExit(pid, tid uint32, ts uint64, made bool) {
	p := a.proc(pid)
	if c := p.copy; c != nil && c.TID == tid {
		c.End = ts
		p.copy = nil
		if p.decode != nil && made {
			p.decode.Copies = append(p.decode.Copies, *c)
		}
	}
}
