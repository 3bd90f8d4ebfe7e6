package requests

import (
	"testing"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
)

const ms = 1_000_000

// feed is a process's decodes, as llama-server makes them: each a batch of sequences.
type feed struct {
	t    *Tracker
	now  uint64
	out  []*Request
	last *assemble.Step // the latest decode
}

// decode runs a decode of dur ms carrying seqs, and returns its start.
func (f *feed) decode(dur uint64, seqs ...events.SeqTokens) uint64 {
	d := &assemble.Step{PID: 1, Context: 0xc7, Start: f.now, End: f.now + dur*ms}
	d.Batch.N = copy(d.Batch.Seqs[:], seqs)
	for _, s := range seqs {
		d.Tokens += int(s.Tokens)
	}
	f.now = d.End + ms
	f.out = f.t.Step(d, f.out)
	f.t.Link(d, Link{Span: [8]byte{1}})
	f.last = d
	return d.Start
}

func prompt(seq, from, n int32) events.SeqTokens {
	return events.SeqTokens{Seq: seq, Tokens: n, PosMin: from, PosMax: from + n - 1, Outputs: 1}
}

func gen(seq, pos int32) events.SeqTokens {
	return events.SeqTokens{Seq: seq, Tokens: 1, PosMin: pos, PosMax: pos, Outputs: 1}
}

func settled(uint32) bool { return true }

// Two slots under continuous batching: one generates while the other's prompt comes, and
// the second request on slot 0 reuses its cached prefix after the server rewinds it.
func TestContinuousBatching(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	f.t.Remove(1, f.now, 0, 0, -1)
	start0 := f.decode(100, prompt(0, 0, 20))
	for i := range int32(3) { // slot 0 generates alone
		f.decode(10, gen(0, 20+i))
	}
	f.t.Remove(1, f.now, 1, 0, -1)
	f.decode(120, gen(0, 23), prompt(1, 0, 30)) // slot 1's prompt rides along
	for i := range int32(2) {
		f.decode(12, gen(0, 24+i), gen(1, 30+i))
	}
	if len(f.out) != 0 {
		t.Fatalf("ended early: %+v", f.out[0])
	}
	// Slot 0's generation is over; a new prompt sharing 16 tokens comes to it.
	f.t.Remove(1, f.now, 0, 16, -1)
	f.decode(60, gen(1, 32), prompt(0, 16, 8))
	if len(f.out) != 1 {
		t.Fatalf("%d requests ended, want slot 0's first", len(f.out))
	}
	r := f.out[0]
	// 20 prompt tokens; outputs from the prompt's decode, 3 alone, 1 beside slot 1's
	// prompt and 2 beside its generation.
	if r.Seq != 0 || r.Prompt != 20 || r.Cached != 0 || r.Output != 7 || r.Ended != Rewound || r.Start != start0 {
		t.Fatalf("first request %+v", r)
	}
	if r.TTFT() != 100*ms || r.GapMax != 121*ms || r.SharedMax != 1 || r.Decodes != 7 || len(r.Links) != 7 {
		t.Fatalf("first request's times: ttft %d, max gap %d, shared %d, decodes %d", r.TTFT(), r.GapMax, r.SharedMax, r.Decodes)
	}
	if want := (3*11 + 121 + 2*13) * ms / 6; r.TPOT() != uint64(want) {
		t.Fatalf("tpot %d, want %d", r.TPOT(), want)
	}
	// Slot 1 stops; slot 0 generates twice more, then the server goes idle.
	f.decode(10, gen(0, 24))
	f.decode(10, gen(0, 25))
	f.out = f.t.Sweep(f.now+500*ms, settled, f.out[:0])
	if len(f.out) != 0 {
		t.Fatal("ended before idle")
	}
	f.out = f.t.Sweep(f.now+2000*ms, func(uint32) bool { return false }, f.out)
	if len(f.out) != 0 {
		t.Fatal("ended while the process was not settled")
	}
	f.out = f.t.Sweep(f.now+2000*ms, settled, f.out)
	if len(f.out) != 2 {
		t.Fatalf("%d requests ended idle, want 2", len(f.out))
	}
	for _, r := range f.out {
		switch r.Seq {
		case 0:
			if r.Prompt != 8 || r.Cached != 16 || r.Output != 3 || r.Ended != Idle {
				t.Fatalf("second request on slot 0 %+v", r)
			}
		case 1:
			if r.Prompt != 30 || r.Output != 4 || r.SharedMax != 1 {
				t.Fatalf("slot 1's request %+v", r)
			}
		}
	}
	if n, _ := f.t.followed(); n != 0 {
		t.Fatalf("%d requests still open", n)
	}
}

// A context shift (a span removed inside the sequence) is no boundary; a cleared cache
// and a prompt split over several decodes are.
func TestShiftClearAndChunkedPrompt(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	chunk := prompt(0, 0, 16)
	chunk.Outputs = 0
	f.decode(50, chunk)
	last := prompt(0, 16, 4)
	f.decode(20, last)
	f.decode(10, gen(0, 20))
	f.t.Remove(1, f.now, 0, 4, 12) // context shift
	f.decode(10, gen(0, 13))
	f.t.Remove(1, f.now, -1, -1, -1) // llama_memory_clear
	f.decode(10, prompt(0, 0, 5))
	if len(f.out) != 1 {
		t.Fatalf("%d ended", len(f.out))
	}
	if r := f.out[0]; r.Prompt != 20 || r.Output != 3 || r.Ended != Cleared || r.TTFT() != 71*ms {
		t.Fatalf("request %+v, ttft %d", r, r.TTFT())
	}
}

// llama-bench's batches name no sequence or position: one request per cleared cache, on
// sequence 0.
func TestImplicitSequence(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	for rep := 0; rep < 2; rep++ {
		f.t.Remove(1, f.now, -1, -1, -1)
		f.decode(40, events.SeqTokens{Seq: 0, Tokens: 16, PosMin: -1, PosMax: -1, Outputs: 1})
		for range 4 {
			f.decode(10, events.SeqTokens{Seq: 0, Tokens: 1, PosMin: -1, PosMax: -1, Outputs: 1})
		}
	}
	f.out = f.t.End(1, Exited, f.out)
	if len(f.out) != 2 {
		t.Fatalf("%d requests, want 2", len(f.out))
	}
	for _, r := range f.out {
		if r.Prompt != 16 || r.Cached != 0 || r.Output != 5 {
			t.Fatalf("request %+v", r)
		}
	}
	if _, ok := f.t.procs[1]; ok {
		t.Fatal("an exited process is still followed")
	}
}

// Many short requests over a long run, on ever new sequence ids: the state stays bounded.
func TestBounded(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	for i := range int32(20000) {
		f.t.Remove(1, f.now, i, 0, -1)
		f.decode(1, prompt(i, 0, 3))
		f.decode(1, gen(i, 3))
	}
	reqs, rewinds := f.t.followed()
	if reqs > maxOpen || rewinds > maxOpen {
		t.Fatalf("%d requests and %d rewinds followed", reqs, rewinds)
	}
	if len(f.out) < 20000-maxOpen {
		t.Fatalf("only %d requests ended", len(f.out))
	}
}

// A failed decode computed nothing.
func TestFailedDecode(t *testing.T) {
	tr := New(1000 * ms)
	d := &assemble.Step{PID: 1, Result: 1}
	d.Batch.N = copy(d.Batch.Seqs[:], []events.SeqTokens{prompt(0, 0, 9)})
	tr.Step(d, nil)
	if n, _ := tr.followed(); n != 0 {
		t.Fatal("a failed decode opened a request")
	}
}

// Decodes held back (while their process's new context is read) reach the tracker after
// the clears between them: each boundary still counts.
func TestBoundariesBeforeHeldDecodes(t *testing.T) {
	tr := New(1000 * ms)
	var held []*assemble.Step
	at := uint64(0)
	for range 3 {
		tr.Remove(1, at, -1, -1, -1)
		d := &assemble.Step{PID: 1, Start: at + 1, End: at + 10}
		d.Batch.N = copy(d.Batch.Seqs[:], []events.SeqTokens{{Tokens: 16, PosMin: -1, PosMax: -1, Outputs: 1}})
		held = append(held, d)
		at += 20
	}
	var out []*Request
	for _, d := range held {
		out = tr.Step(d, out)
	}
	out = tr.End(1, Exited, out)
	if len(out) != 3 {
		t.Fatalf("%d requests, want 3", len(out))
	}
	for _, r := range out {
		if r.Prompt != 16 || r.Output != 1 {
			t.Fatalf("request %+v", r)
		}
	}
}

// llama.cpp's warm-up at load, a decode of BOS and EOS with no sequence named and the
// cache cleared after, is a request no client made; one decode of a real prompt is not.
func TestWarmup(t *testing.T) {
	for _, tc := range []struct {
		r    Request
		want bool
	}{
		{Request{Implicit: true, Decodes: 1, Prompt: 2, Output: 1, Ended: Cleared}, true},
		{Request{Implicit: true, Decodes: 1, Prompt: 2, Output: 1, Ended: Rewound}, true},
		{Request{Implicit: true, Decodes: 1, Prompt: 512, Output: 1, Ended: Cleared}, false}, // llama-bench's prompt test
		{Request{Implicit: true, Decodes: 3, Prompt: 2, Output: 3, Ended: Cleared}, false},
		{Request{Decodes: 1, Prompt: 2, Output: 1, Ended: Rewound}, false}, // a sequence named: a server's client
		{Request{Implicit: true, Decodes: 1, Prompt: 2, Output: 1, Ended: Exited}, false},
		{Request{Implicit: true, Decodes: 1, Prompt: 2, Output: 1, Ended: Exited, server: true}, true}, // llama-server's second, its slot unused
	} {
		if got := tc.r.Warmup(); got != tc.want {
			t.Errorf("%+v: warm-up %v, want %v", tc.r, got, tc.want)
		}
	}
}

// A prompt's start computed over two decodes (a batch of 32): its prefix hashes add up,
// and a generated token's do not count.
func TestPrefixOverDecodes(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	first := prompt(0, 0, 32)
	first.Outputs, first.PrefixTokens, first.Prefix = 0, 32, 0x10
	second := prompt(0, 32, 48)
	second.PrefixTokens, second.Prefix = 32, 0x20
	f.decode(50, first)
	f.decode(60, second)
	f.decode(10, events.SeqTokens{Seq: 0, Tokens: 1, PosMin: 80, PosMax: 80, Outputs: 1, PrefixTokens: 1, Prefix: 0x40})
	f.out = f.t.End(1, Exited, f.out)
	if len(f.out) != 1 || f.out[0].PrefixTokens != events.PrefixTokens || f.out[0].Prefix != 0x30 || f.out[0].Prompt != 80 {
		t.Fatalf("requests %+v, want one of 80 prompt tokens, its first 64 hashed to 0x30", f.out)
	}
}

// Four requests reach a one-slot server at once, with a health check answered between
// and one whose client hung up unanswered: each request takes the oldest arrival not
// answered before its first decode, so the waits grow as the queue drains.
func TestArrivals(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	f.now = 1000 * ms
	f.t.Arrive(1, Conn{ID: 9}, 100*ms) // a health check, answered at once
	f.t.Reply(1, Conn{ID: 9}, 101*ms)
	f.t.Arrive(1, Conn{ID: 12}, 200*ms) // a client that hung up before its turn
	f.t.Reply(1, Conn{ID: 12}, 300*ms)
	for i, fd := range []uint64{10, 11, 13, 14} {
		f.t.Arrive(1, Conn{ID: fd}, uint64(400+i)*ms)
	}
	for i := range int32(4) {
		f.t.Remove(1, f.now, 0, 0, -1)
		f.decode(100, prompt(0, 0, 20))
		f.decode(10, gen(0, 20))
		f.t.Reply(1, Conn{ID: []uint64{10, 11, 13, 14}[i]}, f.now)
	}
	f.out = f.t.End(1, Exited, f.out)
	if len(f.out) != 4 {
		t.Fatalf("%d requests, want 4", len(f.out))
	}
	for i, r := range f.out {
		if want := uint64(400+i) * ms; r.Arrived != want || r.Wait() != r.Start-want {
			t.Errorf("request %d arrived %d ms, want %d", i, r.Arrived/ms, want/ms)
		}
	}
	if f.out[3].Wait() <= f.out[1].Wait() {
		t.Errorf("waits %d then %d ms: the queue's last waited longest", f.out[1].Wait()/ms, f.out[3].Wait()/ms)
	}
	for i, r := range f.out { // the first had the slot free; the others waited for it
		if r.Queued != (i > 0) {
			t.Errorf("request %d queued %v", i, r.Queued)
		}
	}
	// Arrivals within a millisecond, served in another order than they came (the
	// server's threads hand them on as each has read its request), each answered as it
	// ends: each request has its own.
	o := &feed{t: New(1000 * ms), now: 1000 * ms}
	for i, fd := range []uint64{4, 5, 6, 7} {
		o.t.Arrive(1, Conn{ID: fd}, 900*ms+uint64(i)*ms/4)
	}
	served := []uint64{5, 7, 4, 6}
	for _, fd := range served {
		o.t.Remove(1, o.now, 0, 0, -1)
		o.decode(100, prompt(0, 0, 20))
		o.decode(10, gen(0, 20))
		o.t.Reply(1, Conn{ID: fd}, o.now)
	}
	o.out = o.t.End(1, Exited, o.out)
	for i, r := range o.out {
		if want := 900*ms + uint64(served[i]-4)*ms/4; r.Arrived != want {
			t.Errorf("served %d: arrived at %d µs, want %d", i, r.Arrived/1000, want/1000)
		}
	}
	// Through a front: ollama serve holds the second request for its runner's one slot,
	// then hands it on; its arrival at the front is when its client sent it, though the
	// runner's own connection (fd 5 of its, fd 5 of the front's too) saw it later.
	fr := &feed{t: New(1000 * ms), now: 1000 * ms}
	front := func(fd uint64) Conn { return Conn{ID: fd, Front: true} }
	fr.t.Arrive(1, front(5), 900*ms)
	fr.t.Arrive(1, front(6), 901*ms)
	for i := range 2 {
		fr.t.Arrive(1, Conn{ID: 5}, fr.now-ms)
		fr.t.Remove(1, fr.now, 0, 0, -1)
		fr.decode(100, prompt(0, 0, 20))
		fr.decode(10, gen(0, 20))
		fr.t.Reply(1, Conn{ID: 5}, fr.now)
		fr.t.Reply(1, front(uint64(5+i)), fr.now+ms)
	}
	fr.out = fr.t.End(1, Exited, fr.out)
	if len(fr.out) != 2 || fr.out[0].Arrived != 900*ms || fr.out[1].Arrived != 901*ms || fr.out[0].Queued || !fr.out[1].Queued {
		for _, r := range fr.out {
			t.Errorf("through a front: arrived %d ms, queued %v", r.Arrived/ms, r.Queued)
		}
	}
	// Two slots, two requests at once: the second waits for the first's prompt to be
	// computed, not for a slot.
	b := &feed{t: New(1000 * ms), now: 1000 * ms}
	b.t.Arrive(1, Conn{ID: 10}, 900*ms)
	b.t.Arrive(1, Conn{ID: 11}, 901*ms)
	b.decode(150, prompt(0, 0, 20))
	b.decode(150, gen(0, 20), prompt(1, 0, 20))
	b.out = b.t.End(1, Exited, b.out)
	for _, r := range b.out {
		if r.Arrived == 0 || r.Queued {
			t.Errorf("two slots: seq %d arrived %d ms, queued %v", r.Seq, r.Arrived/ms, r.Queued)
		}
	}
	// No arrival known: no wait, and arrivals are bounded.
	g := &feed{t: New(1000 * ms)}
	for i := range 3 * maxArrivals {
		g.t.Arrive(1, Conn{ID: uint64(i)}, uint64(i))
	}
	if n := len(g.t.procs[1].arrivals); n != maxArrivals {
		t.Errorf("%d arrivals kept, want %d", n, maxArrivals)
	}
	h := &feed{t: New(1000 * ms)}
	h.decode(100, prompt(0, 0, 20))
	h.out = h.t.End(1, Exited, h.out)
	if r := h.out[0]; r.Arrived != 0 || r.Wait() != 0 {
		t.Errorf("no arrival seen: arrived %d, wait %d", r.Arrived, r.Wait())
	}
}

// llama-server computes a prompt longer than its batch in chunks, removing what lies past
// each chunk before the next (nothing): one request, its prompt every chunk's tokens. After
// it generated, a rewind to its end is the next turn: another request.
func TestChunkedPromptRewinds(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	for i := range int32(3) {
		f.t.Remove(1, f.now, 0, 125*i, -1)
		chunk := prompt(0, 125*i, 125)
		chunk.Outputs = 0
		f.decode(100, chunk, gen(1, 40+i))
	}
	f.t.Remove(1, f.now, 0, 375, -1)
	f.decode(100, prompt(0, 375, 118))
	f.decode(10, gen(0, 493))
	f.t.Remove(1, f.now, 0, 494, -1) // the next turn, its prompt extending this one's
	f.decode(50, prompt(0, 494, 20))
	f.out = f.t.End(1, Exited, f.out)
	var seq0 []*Request
	for _, r := range f.out {
		if r.Seq == 0 {
			seq0 = append(seq0, r)
		}
	}
	if len(seq0) != 2 || seq0[0].Prompt != 493 || seq0[0].Output != 2 || seq0[0].Ended != Rewound || seq0[1].Prompt != 20 {
		for _, r := range seq0 {
			t.Errorf("request %+v", *r)
		}
	}
}
