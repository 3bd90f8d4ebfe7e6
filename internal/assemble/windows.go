package assemble

// window is a span of time during which the node probes were attached; Off is 0 while
// they still are. It traces the first Graphs graphs that start and end in it (all if 0):
// probes detached a moment after its last graph may see another whole, when the machine
// is slow to wake the reader.
type window struct {
	On, Off        uint64
	Graphs, traced int
}

func (w window) covers(start, end uint64) bool {
	return w.On != 0 && w.On <= start && (w.Off == 0 || end <= w.Off)
}

// NodesOn records that the node probes of process pid were attached by ts: the first
// graphs graphs (all if 0) that start after it are traced until NodesOff. Counter
// readings start afresh: what the threads did meanwhile was not traced.
func (a *Assembler) NodesOn(pid uint32, ts uint64, graphs int) {
	p := a.proc(pid)
	for _, t := range p.threads {
		t.ctr = counting{}
	}
	p.windows[p.next%len(p.windows)] = window{On: ts, Graphs: graphs}
	p.next++
}

// NodesOff records that the node probes of process pid are detached from ts on.
func (a *Assembler) NodesOff(pid uint32, ts uint64) {
	p := a.proc(pid)
	if w := &p.windows[(p.next+len(p.windows)-1)%len(p.windows)]; w.On != 0 && w.Off == 0 {
		w.Off = ts
	}
}

// traced says whether a graph, ended now, is traced, counting it into its window, and
// whether it is the last the newest window traces.
func (p *process) traced(start, end uint64) (traced, fills bool) {
	for i := range p.windows {
		if w := &p.windows[i]; w.covers(start, end) {
			if w.Graphs > 0 && w.traced >= w.Graphs {
				return false, false
			}
			w.traced++
			return true, w.traced == w.Graphs && i == (p.next-1)%len(p.windows)
		}
	}
	return false, false
}
