// Package requests follows each sequence through the batches llama_decode receives and
// the memory calls that rewind it, and cuts the stream into requests: one generation on
// one sequence. It is pure logic, fed in order by the reader, one call per decode, per
// rewind and per sweep: never per node.
package requests

import (
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
)

// maxLinks bounds the decode spans a request links to: a long generation has a decode per
// token.
const maxLinks = 128

// maxOpen bounds the sequences followed per process, and the rewinds remembered.
const maxOpen = 1024

// promptIdle is how long a request still in its prompt waits without a decode before it
// is ended: a prompt may wait for room in the batch while others' long prompts compute.
const promptIdle = 30_000_000_000

// End says why a request ended.
type End string

const (
	Rewound End = "rewound" // its sequence was rewound, for a new prompt (llama_memory_seq_rm to the end)
	Cleared End = "cleared" // the cache was cleared (llama_memory_clear)
	Idle    End = "idle"    // no decode carried it for Tracker.Idle
	Exited  End = "exited"  // its process exited
	Stopped End = "stopped" // profinfer stopped before it ended
	Evicted End = "evicted" // its process followed too many sequences at once
)

// Link is a decode span a request's tokens were computed in.
type Link struct {
	Trace pcommon.TraceID
	Span  pcommon.SpanID
}

// Request is one generation on one sequence of one llama_context. Times are
// CLOCK_MONOTONIC nanoseconds.
type Request struct {
	PID     uint32
	Context uint64
	Seq     int32
	// Implicit says its batches named no sequence (llama_batch_get_one): sequence 0 is
	// assumed.
	Implicit bool
	// Arrived is when the request reached the server (the first bytes its connection
	// received after the server last answered on it), 0 where none was seen, known once
	// it ended; Start is the entry of the first decode that carried its prompt,
	// FirstToken the exit of the decode that computed its first output, End the exit of
	// its last decode.
	Arrived, Start, FirstToken, End uint64
	// Queued says that the request on its sequence before it was still computing when it
	// arrived: it waited for that slot to free, as a server with every slot busy defers a
	// request. A wait without it is the server's reading of the request, and the decode
	// in progress when it came.
	Queued bool
	before uint64 // the last decode of the request before it on its sequence
	// Prompt is the prompt tokens computed, Cached those already in the cache (the
	// position its prompt started at), Output the tokens generated: one per decode that
	// computed an output for it, the first from its prompt's last decode.
	Prompt, Cached, Output int
	// PrefixTokens is how many of its prompt's first events.PrefixTokens tokens it
	// computed, and Prefix their hashes summed: with all of them computed, an earlier
	// request with the same Prefix computed the same start.
	PrefixTokens int
	Prefix       uint32
	// GapSum and GapMax are the time between the exits of its output decodes after the
	// first: per output token, past the first. Gaps holds each of them, for their median;
	// GapMaxPrompts is the prompt tokens of other requests its context computed in the
	// longest: what filled it.
	GapSum, GapMax uint64
	Gaps           Gaps
	GapMaxPrompts  int
	// Decodes is how many decodes carried it; SharedSum and SharedMax count the other
	// sequences in those decodes.
	Decodes              int
	SharedSum, SharedMax int
	// Time is where its time from its first decode's start to its last decode's end
	// went, by Share: with Wait, its whole latency. MixedDecodes are the decodes that
	// computed its next token beside other requests' prompts.
	Time         [Shares]uint64
	MixedDecodes int
	// Cells is the most KV cells its sequence held; SeqCells the cells a sequence of its
	// context may hold (n_ctx_seq), 0 where unknown. Full says that its sequence reached
	// them, as a server stops a generation at its slot's context (or shifts it); Shifts
	// counts the context shifts of its sequence while it ran (a span removed inside it).
	Cells, SeqCells int
	Full            bool
	Shifts          int
	snap            totals // its context's totals after its last decode
	server          bool   // its process named sequences in other batches: a server's clients
	Links           []Link
	Ended           End
}

// Warmup says that the request is llama.cpp's warm-up at load (common_init): a batch of
// the BOS and EOS tokens with no sequence named, decoded once, then the cache cleared or
// the sequence rewound for the first request, or left as it was by a server that names
// its clients' sequences (llama-server warms up twice, and may never use the second's
// slot again). Ollama's runners and llama-server do it before they serve: no client
// asked for it.
func (r *Request) Warmup() bool {
	return r.Implicit && r.Decodes == 1 && r.Prompt+r.Cached <= 2 && (r.Ended == Cleared || r.Ended == Rewound || r.server)
}

// PromptStall is the time its generation waited for other requests' prompts, in
// nanoseconds: its context's decodes that computed them while it generated, with its
// next token or without, less its median pace for the tokens they gave it.
func (r *Request) PromptStall() uint64 {
	held := r.Time[TimeMixed] + r.Time[TimeOtherPrompts]
	paced := uint64(r.MixedDecodes) * r.Gaps.Median()
	if r.Output < 2 || held <= paced {
		return 0
	}
	return held - paced
}

// Wait is the time between its arrival and its first decode, in nanoseconds: its wait
// for a slot, and the server's reading and tokenizing of it; 0 where its arrival was not
// seen.
func (r *Request) Wait() uint64 {
	if r.Arrived == 0 {
		return 0
	}
	return r.Start - r.Arrived
}

// TTFT is the time to the first token, in nanoseconds; 0 without one.
func (r *Request) TTFT() uint64 {
	if r.Output == 0 {
		return 0
	}
	return r.FirstToken - r.Start
}

// TPOT is the mean time per output token after the first, in nanoseconds; 0 with fewer
// than two.
func (r *Request) TPOT() uint64 {
	if r.Output < 2 {
		return 0
	}
	return r.GapSum / uint64(r.Output-1)
}

// key is a sequence of a context.
type key struct {
	ctx uint64
	seq int32
}

type process struct {
	ctxs     map[uint64]*context // by llama_context
	open     map[key]*Request
	rewound  map[int32]*marks // the latest rewinds of each sequence
	cleared  marks            // the latest clears
	arrivals []arrival        // requests that reached the server, oldest first
	ended    map[key]uint64   // the last decode of each sequence's latest ended request
	named    bool             // a batch of it named its sequences
}

// Conn is a connection requests reach a process by, its own or its front's (the process
// that hands it requests: ollama serve): ID tells it from the others open at once.
type Conn struct {
	ID    uint64
	Front bool
}

// arrival is a request that reached the server on conn at ts, and was answered (or its
// connection closed) at replied, 0 while it was not.
type arrival struct {
	conn        Conn
	ts, replied uint64
}

// maxArrivals bounds the arrivals a process keeps that no request took: a server's
// health checks and other calls that compute nothing.
const maxArrivals = 256

// marks are the times of the latest rewinds or clears, and the position each removed
// from. More than one is kept: a process's decodes may be held back a while (until its
// new context is read) while the calls between them are not, and llama-bench clears
// before every run.
type marks struct {
	ts   [8]uint64
	from [8]int32
	next int
}

func (m *marks) add(ts uint64, from int32) {
	m.ts[m.next], m.from[m.next] = ts, from
	m.next = (m.next + 1) % len(m.ts)
}

// between says whether a mark falls after last and by ts that removed positions before
// end: one that removed from end on removed nothing a sequence held.
func (m *marks) between(last, ts uint64, end int32) bool {
	for i, t := range m.ts {
		if t > last && t <= ts && m.from[i] < end {
			return true
		}
	}
	return false
}

// Tracker cuts each process's sequences into requests.
type Tracker struct {
	// Idle is how long a generating request goes without a decode before it is ended (a
	// request cut short by its client, or one whose engine waits for the next prompt).
	Idle  uint64
	procs map[uint32]*process
}

// New returns a tracker that ends generating requests idle for idle nanoseconds.
func New(idle uint64) *Tracker { return &Tracker{Idle: idle, procs: map[uint32]*process{}} }

func (t *Tracker) proc(pid uint32) *process {
	p := t.procs[pid]
	if p == nil {
		p = &process{open: map[key]*Request{}, rewound: map[int32]*marks{}}
		t.procs[pid] = p
	}
	return p
}

// boundary says whether request r's sequence was rewound, or the cache cleared, after
// its last decode and by ts. A server computing a prompt in chunks removes what lies past
// each chunk before the next (nothing): no boundary while r computes its prompt; after r
// generated, a rewind to its end starts the next turn of a conversation.
func (p *process) boundary(r *Request, ts uint64) (End, bool) {
	end := int32(math.MaxInt32)
	if r.Output == 0 {
		end = int32(r.Cached + r.Prompt)
	}
	if rw := p.rewound[r.Seq]; rw != nil && rw.between(r.End, ts, end) {
		return Rewound, true
	}
	if p.cleared.between(r.End, ts, math.MaxInt32) {
		return Cleared, true
	}
	return "", false
}

// Step follows step d (a decode), sets its Mix, and appends to out the requests it shows
// ended. A decode that failed computed nothing. Link gives the requests it carried its
// span, once built.
func (t *Tracker) Step(d *assemble.Step, out []*Request) []*Request {
	p := t.proc(d.PID)
	if d.Result != 0 {
		d.Mix = p.classify(d)
		return out
	}
	c := p.context(d.Context)
	seqs := d.Batch.Sequences()
	p.named = p.named || len(seqs) > 0 && d.Batch.Flags&events.BatchNoSeq == 0
	var carried [events.MaxSeqs]*Request
	for i, s := range seqs {
		k := key{d.Context, s.Seq}
		r := p.open[k]
		if r != nil {
			if why, ok := p.boundary(r, d.Start); ok {
				out = t.end(p, k, why, out)
				r = nil
			}
		}
		if r == nil {
			if len(p.open) >= maxOpen {
				out = t.evict(p, out)
			}
			r = &Request{PID: d.PID, Context: d.Context, Seq: s.Seq, Implicit: d.Batch.Flags&events.BatchNoSeq != 0,
				Start: d.Start, Cached: max(int(s.PosMin), 0), before: p.ended[k]}
			p.open[k] = r
		}
		carried[i] = r
	}
	d.Mix = mix(d, carried[:len(seqs)])
	c.step(d, carried[:len(seqs)])
	for i, s := range seqs {
		r := carried[i]
		r.Decodes++
		others := len(seqs) - 1
		r.SharedSum += others
		r.SharedMax = max(r.SharedMax, others)
		switch {
		case r.Output == 0:
			r.Prompt += int(s.Tokens)
			r.PrefixTokens += int(s.PrefixTokens)
			r.Prefix += s.Prefix
			if s.Outputs > 0 {
				r.FirstToken = d.End
				r.Output = 1
			}
		case s.Outputs > 0: // the tokens fed back are its own outputs, not prompt
			gap := d.End - r.End
			r.GapSum += gap
			r.Gaps.Add(gap)
			if gap > r.GapMax {
				r.GapMax = gap
				r.GapMaxPrompts = c.totals.promptTokens - r.snap.promptTokens
			}
			r.Output++
		}
		r.End = d.End
		r.snap = c.totals
		r.Cells = max(r.Cells, c.cells[s.Seq])
		if d.Settings.SeqSize > 0 {
			r.SeqCells = d.Settings.SeqSize
			r.Full = r.Full || c.cells[s.Seq]+1 >= r.SeqCells
		}
	}
	return out
}

// Link gives the requests step d carried its span, link.
func (t *Tracker) Link(d *assemble.Step, link Link) {
	p := t.procs[d.PID]
	if p == nil || link.Span.IsEmpty() || d.Result != 0 {
		return
	}
	for _, s := range d.Batch.Sequences() {
		if r := p.open[key{d.Context, s.Seq}]; r != nil && len(r.Links) < maxLinks {
			r.Links = append(r.Links, link)
		}
	}
}

// Classify sets the Mix of step d, which its process ended inside, from what the
// requests it carried had done before it.
func (t *Tracker) Classify(d *assemble.Step) {
	d.Mix = t.proc(d.PID).classify(d)
}

// classify is d's Mix as the open requests of its sequences read it, d changing nothing.
func (p *process) classify(d *assemble.Step) assemble.Mix {
	seqs := d.Batch.Sequences()
	var carried [events.MaxSeqs]*Request
	for i, s := range seqs {
		if r := p.open[key{d.Context, s.Seq}]; r != nil {
			if _, ok := p.boundary(r, d.Start); !ok {
				carried[i] = r
			}
		}
	}
	return mix(d, carried[:len(seqs)])
}

// Arrive follows a request reaching process pid's server on conn at ts.
func (t *Tracker) Arrive(pid uint32, conn Conn, ts uint64) {
	p := t.proc(pid)
	if len(p.arrivals) >= maxArrivals {
		p.arrivals = slices.Delete(p.arrivals, 0, len(p.arrivals)-maxArrivals+1)
	}
	p.arrivals = append(p.arrivals, arrival{conn: conn, ts: ts})
}

// Reply follows the server's answer on conn at ts (or its close): its request is
// answered, and a request that starts after it is not that one.
func (t *Tracker) Reply(pid uint32, conn Conn, ts uint64) {
	p := t.procs[pid]
	if p == nil {
		return
	}
	for i := len(p.arrivals) - 1; i >= 0; i-- {
		if a := &p.arrivals[i]; a.conn == conn {
			if a.replied == 0 {
				a.replied = ts
			}
			return
		}
	}
}

// arrival returns when request r, ended, arrived, 0 where none is known. Its arrival
// came before its first decode and was answered after it: requests that arrive together
// are taken in whatever order the server's threads hand them on, so of those the one
// answered nearest to r's start, first token or end is r's (a streamed answer begins at
// the first, a whole one follows the last), else the oldest not yet answered. A front's
// arrival comes before the process's own: the client sent the request there, and the
// front may have held it (ollama serve, for a slot of its runner's). The arrivals no open
// request can have (answered before every open one started) go with it.
func (p *process) arrival(r *Request) uint64 {
	best, bestOwn, bestD := -1, true, uint64(math.MaxUint64)
	for i, a := range p.arrivals {
		if a.ts >= r.Start || (a.replied != 0 && a.replied < r.Start) {
			continue
		}
		d := uint64(math.MaxUint64 - 1) // unanswered: after every answered one, oldest first
		if a.replied != 0 {
			d = min(absDiff(a.replied, r.Start), absDiff(a.replied, r.FirstToken), absDiff(a.replied, r.End))
		}
		own := !a.conn.Front
		if (bestOwn && !own) || (own == bestOwn && d < bestD) {
			best, bestOwn, bestD = i, own, d
		}
	}
	var at uint64
	if best >= 0 {
		at = p.arrivals[best].ts
		p.arrivals = slices.Delete(p.arrivals, best, best+1)
	}
	oldest := uint64(math.MaxUint64)
	for _, o := range p.open {
		oldest = min(oldest, o.Start)
	}
	p.arrivals = slices.DeleteFunc(p.arrivals, func(a arrival) bool { return a.replied != 0 && a.replied < oldest })
	return at
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// Remove follows a llama_memory_seq_rm(seq, p0, p1) of process pid at ts: removing every
// position from p0 on rewinds the sequence, as a server does when a new prompt comes to a
// slot; removing a span within it (a context shift) does not, and counts a shift of the
// request open on it. seq < 0 is every sequence.
func (t *Tracker) Remove(pid uint32, ts uint64, seq, p0, p1 int32) {
	p := t.proc(pid)
	p.remove(seq, p0, p1)
	if p1 >= 0 && p1 > p0 {
		return
	}
	if seq < 0 {
		p.cleared.add(ts, 0)
		return
	}
	m := p.rewound[seq]
	if m == nil {
		if len(p.rewound) >= maxOpen {
			clear(p.rewound)
		}
		m = &marks{}
		p.rewound[seq] = m
	}
	m.add(ts, max(p0, 0))
}

// Sweep ends, at now, the requests whose sequence was rewound since their last decode,
// and those idle too long, in processes settled says hold no decode back (none in flight,
// none waiting to be fed).
func (t *Tracker) Sweep(now uint64, settled func(pid uint32) bool, out []*Request) []*Request {
	for pid, p := range t.procs {
		if !settled(pid) {
			continue
		}
		for k, r := range p.open {
			if why, ok := p.boundary(r, now); ok {
				out = t.end(p, k, why, out)
				continue
			}
			idle := t.Idle
			if r.Output == 0 {
				idle = promptIdle
			}
			if now > r.End && now-r.End >= idle {
				out = t.end(p, k, Idle, out)
			}
		}
	}
	return out
}

// End ends every request of process pid, for why (Exited, Stopped), and forgets it.
func (t *Tracker) End(pid uint32, why End, out []*Request) []*Request {
	p := t.procs[pid]
	if p == nil {
		return out
	}
	for k := range p.open {
		out = t.end(p, k, why, out)
	}
	delete(t.procs, pid)
	return out
}

// followed is how many requests and rewinds are followed now, for tests of boundedness.
func (t *Tracker) followed() (requests, rewinds int) {
	for _, p := range t.procs {
		requests += len(p.open)
		rewinds += len(p.rewound)
	}
	return requests, rewinds
}

func (t *Tracker) end(p *process, k key, why End, out []*Request) []*Request {
	r := p.open[k]
	delete(p.open, k)
	if p.ended == nil || len(p.ended) >= maxOpen {
		p.ended = map[key]uint64{}
	}
	p.ended[k] = r.End
	r.Ended = why
	r.server = p.named
	if !r.Warmup() {
		r.Arrived = p.arrival(r)
		r.Queued = r.Arrived != 0 && r.before > r.Arrived
	}
	return append(out, r)
}

// evict ends the request of p that decoded least recently.
func (t *Tracker) evict(p *process, out []*Request) []*Request {
	var oldest key
	var at uint64
	first := true
	for k, r := range p.open {
		if first || r.End < at {
			oldest, at, first = k, r.End, false
		}
	}
	return t.end(p, oldest, Evicted, out)
}
