// Package window schedules node sampling. Node probes are hit once per graph node on
// every thread, so outside nodes.mode all they are attached in windows: from one window's
// end, wait the interval, attach, let a number of graphs complete under them, detach. An
// idle target costs nothing while a window is open, so a window waits for its graphs
// however long they take to come: it ends when its last graph is assembled (Filled), not
// on a timer. The schedule is kept per workload, a command, as well as per process: a
// command run again and again is sampled as one long process would be.
//
// The first windows go to the phases (a llama.cpp prefill or decode, whisper's encode,
// a device's share) that none has traced yet: a graph of such a phase, seen untraced,
// brings the next window forward to now, so that a server's page has its decode's ops
// within the first seconds of decoding, not an interval later. Such a window traces some
// graphs: the untraced graph is read up to a second late, and by then the next to start
// may be another phase's (a server's next request's prefill, at every catch-up alike
// where its requests take about the reader's second each).
package window

import "time"

// Probes are one process's node probes.
type Probes interface {
	// Open attaches them and starts a window, and says whether any are in place. A window
	// brought forward for a phase (catchUp) traces CatchUpGraphs graphs at least.
	Open(catchUp bool) bool
	// Close ends the window and detaches them.
	Close()
}

// Scheduler decides when each process's window opens. It is not safe for concurrent use.
type Scheduler struct {
	interval time.Duration
	now      func() time.Time
	procs    map[int]*proc
	// last is when a window of each workload last opened or closed, for an interval.
	last map[string]time.Time
	// phases are those each workload's windows traced, and brought forward for.
	phases map[string]*phases
}

type proc struct {
	probes   Probes
	workload string
	open     bool
	next     time.Time // when the next window opens, while none is open
	phases   *phases   // its workload's, or its own where the workload is unknown
	catchUp  bool      // the next window was brought forward for a phase
}

// Phase is a kind of graph a window may trace: a runtime's phase (prefill, decode,
// encode), on the CPU or, with Backend set, a device's share of it; a decode's at a
// depth of the KV cache (Depth, a band of DepthBand's), as a decode's attention grows
// with it and a graph of another depth does not stand for it.
type Phase struct {
	Name, Backend string
	Depth         int
}

// DepthBand is the band of a decode at cells KV cells: under 512, under 2048, under 8192,
// and beyond.
func DepthBand(cells float64) int {
	switch {
	case cells < 512:
		return 0
	case cells < 2048:
		return 1
	case cells < 8192:
		return 2
	}
	return 3
}

// phases are the phases some window traced a graph of, and how many times a graph of
// each, untraced, brought a window forward.
type phases struct {
	traced map[Phase]bool
	asked  map[Phase]int
}

// catchUps is how many windows a phase can bring forward: one may trace another phase's
// graph (a prefill that comes as the window opens), never the model's every graph.
const catchUps = 3

// CatchUpGraphs is how many graphs a window brought forward traces at least: a server's
// next request's prefill may come first, then its decodes (or its prompt's next
// ubatches). A few graphs, a few times a phase: a one-off cost.
const CatchUpGraphs = 4

// New returns a scheduler that waits interval between windows, on the clock now.
func New(interval time.Duration, now func() time.Time) *Scheduler {
	return &Scheduler{interval: interval, now: now, procs: map[int]*proc{}, last: map[string]time.Time{}, phases: map[string]*phases{}}
}

// Add schedules process pid, which runs workload (its executable and arguments; "" if
// unknown). Its first window opens at once, so that missing node symbols show now, unless
// a window of the same workload opened or closed less than an interval ago: then it opens
// an interval after that one. A command run in a loop (llama-bench runs, a job restarted)
// then pays a window an interval, as one process running as long would, rather than one a
// run; on kernels without uprobe_multi a window stalls the model some 0.1 s. Add says
// whether the window opened.
func (s *Scheduler) Add(pid int, workload string, probes Probes) bool {
	now := s.now()
	for w, t := range s.last {
		if now.Sub(t) >= s.interval {
			delete(s.last, w)
		}
	}
	for w := range s.phases { // a workload's phases last as long as its schedule does
		if _, ok := s.last[w]; !ok && !s.running(w) {
			delete(s.phases, w)
		}
	}
	p := &proc{probes: probes, workload: workload}
	if workload == "" {
		p.phases = &phases{traced: map[Phase]bool{}, asked: map[Phase]int{}}
	} else if p.phases = s.phases[workload]; p.phases == nil {
		p.phases = &phases{traced: map[Phase]bool{}, asked: map[Phase]int{}}
		s.phases[workload] = p.phases
	}
	s.procs[pid] = p
	if t, ok := s.last[workload]; ok {
		p.next = t.Add(s.interval)
		return false
	}
	s.open(p, now)
	return p.open
}

// Traced notes that a window of process pid traced a graph of phase.
func (s *Scheduler) Traced(pid int, phase Phase) {
	if p := s.procs[pid]; p != nil {
		p.phases.traced[phase] = true
	}
}

// Untraced notes a graph of process pid's phase that no window traced. If no window of
// its workload traced that phase yet, its next window is brought forward to now, at most
// catchUps times a phase, and Untraced says so: Tick opens it.
func (s *Scheduler) Untraced(pid int, phase Phase) bool {
	p := s.procs[pid]
	if p == nil || p.open || p.phases.traced[phase] || p.phases.asked[phase] >= catchUps {
		return false
	}
	p.phases.asked[phase]++
	p.catchUp = true
	if now := s.now(); p.next.After(now) {
		p.next = now
	}
	return true
}

// NextOf returns when process pid's next window opens: zero while one is open, or for a
// process not scheduled.
func (s *Scheduler) NextOf(pid int) time.Time {
	if p := s.procs[pid]; p != nil && !p.open {
		return p.next
	}
	return time.Time{}
}

// running says whether a process of workload is scheduled.
func (s *Scheduler) running(workload string) bool {
	for _, p := range s.procs {
		if p.workload == workload {
			return true
		}
	}
	return false
}

// Remove forgets process pid; its probes are the caller's to close.
func (s *Scheduler) Remove(pid int) { delete(s.procs, pid) }

// Tick opens the windows that are due, and returns when the next one opens (zero: none
// waits).
func (s *Scheduler) Tick() time.Time {
	now := s.now()
	for _, p := range s.procs {
		if !p.open && !now.Before(p.next) {
			s.open(p, now)
		}
	}
	return s.Next()
}

// Filled ends process pid's window, whose last graph came, and returns when the next
// window opens.
func (s *Scheduler) Filled(pid int) time.Time {
	if p := s.procs[pid]; p != nil && p.open {
		p.probes.Close()
		p.open = false
		now := s.now()
		p.next = now.Add(s.interval)
		s.seen(p, now)
	}
	return s.Next()
}

// Next returns when the next window opens (zero: none waits).
func (s *Scheduler) Next() time.Time {
	var next time.Time
	for _, p := range s.procs {
		if !p.open && (next.IsZero() || p.next.Before(next)) {
			next = p.next
		}
	}
	return next
}

// open opens p's window; one that cannot open is tried again an interval later.
func (s *Scheduler) open(p *proc, now time.Time) {
	p.open = p.probes.Open(p.catchUp)
	p.catchUp = false
	if !p.open {
		p.next = now.Add(s.interval)
		return
	}
	s.seen(p, now)
}

// seen notes a window of p's workload opening or closing now.
func (s *Scheduler) seen(p *proc, now time.Time) {
	if p.workload != "" {
		s.last[p.workload] = now
	}
}
