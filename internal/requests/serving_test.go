package requests

import (
	"math"
	"testing"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/ggml"
)

// A decode's phase is what its sequences did: four slots adding their next tokens are a
// decode of width four, whatever the batch's size; a new request's prompt beside them is
// mixed; a draft verified on a generating sequence is decode.
func TestMix(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	for s := range int32(4) {
		f.decode(100, prompt(s, 0, 20))
	}
	if m := f.last.Mix; m.Phase() != assemble.PhasePrefill || m.PromptTokens != 20 || m.Sequences() != 1 {
		t.Fatalf("a prompt alone: %+v, %s", m, m.Phase())
	}
	f.decode(50, gen(0, 20), gen(1, 20), gen(2, 20), gen(3, 20))
	if m := f.last.Mix; m.Phase() != assemble.PhaseDecode || m.NextSeqs != 4 || m.NextTokens != 4 || m.PromptSeqs != 0 {
		t.Fatalf("four slots' next tokens: %+v, %s", m, m.Phase())
	}
	f.decode(200, gen(0, 21), gen(1, 21), gen(2, 21), prompt(4, 0, 26))
	if m := f.last.Mix; m.Phase() != assemble.PhaseMixed || m.NextSeqs != 3 || m.PromptSeqs != 1 || m.PromptTokens != 26 {
		t.Fatalf("a prompt beside three slots: %+v, %s", m, m.Phase())
	}
	draft := events.SeqTokens{Seq: 0, Tokens: 4, PosMin: 22, PosMax: 25, Outputs: 4}
	f.decode(60, draft)
	if m := f.last.Mix; m.Phase() != assemble.PhaseDecode || m.NextTokens != 4 {
		t.Fatalf("a draft verified: %+v, %s", m, m.Phase())
	}
	// Read from the batch alone, before the requests are followed, the draft is a prompt.
	d := &assemble.Step{PID: 1, Context: 0xc7, Tokens: 4}
	d.Batch.N = copy(d.Batch.Seqs[:], []events.SeqTokens{draft})
	if ph := Phase(d); ph != assemble.PhasePrefill {
		t.Errorf("a draft read from its batch alone: %s", ph)
	}
	// 20 slots' next tokens, the probe summing 16: the rest are next tokens too.
	wide := &assemble.Step{PID: 1, Context: 0xc8, Tokens: 20, Start: f.now, End: f.now + ms}
	for i := range events.MaxSeqs {
		wide.Batch.Seqs[i] = gen(int32(i), 30)
	}
	wide.Batch.N, wide.Batch.Flags = events.MaxSeqs, events.BatchMoreSeqs
	f.t.Step(wide, nil)
	if m := wide.Mix; m.Phase() != assemble.PhaseDecode || m.NextSeqs != 20 || m.NextTokens != 20 {
		t.Errorf("20 slots: %+v", m)
	}
	// llama-bench's batches name no sequence: one token is a decode, more a prompt.
	for _, tc := range []struct {
		tokens int
		want   string
	}{{1, assemble.PhaseDecode}, {512, assemble.PhasePrefill}} {
		d := &assemble.Step{PID: 2, Tokens: tc.tokens, Start: 1, End: 2}
		f.t.Step(d, nil)
		if d.Mix.Phase() != tc.want || d.Mix.Sequences() != 1 {
			t.Errorf("a batch of %d tokens and no sequences: %+v", tc.tokens, d.Mix)
		}
	}
}

// Each request's time from its first decode to its last adds up, share by share: its
// prompt, its next tokens alone, beside others' and beside a prompt, the decodes without
// it, and the time between its context's decodes.
func TestRequestTime(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	f.decode(100, prompt(0, 0, 20))
	f.decode(10, gen(0, 20))                    // alone
	f.decode(120, gen(0, 21), prompt(1, 0, 30)) // beside slot 1's prompt
	f.decode(12, gen(0, 22), gen(1, 30))        // batched
	f.decode(80, prompt(2, 0, 40))              // without slots 0 and 1: another's prompt
	f.decode(12, gen(0, 23), gen(1, 31), gen(2, 40))
	f.out = f.t.End(1, Exited, f.out)
	if len(f.out) != 3 {
		t.Fatalf("%d requests", len(f.out))
	}
	for _, r := range f.out {
		var sum uint64
		for _, ns := range r.Time {
			sum += ns
		}
		if sum != r.End-r.Start {
			t.Errorf("seq %d: shares %v sum to %d ns, its span is %d", r.Seq, r.Time, sum, r.End-r.Start)
		}
	}
	var r *Request
	for _, o := range f.out {
		if o.Seq == 0 {
			r = o
		}
	}
	want := [Shares]uint64{TimePrompt: 100 * ms, TimeAlone: 10 * ms, TimeBatched: 24 * ms, TimeMixed: 120 * ms,
		TimeOtherPrompts: 80 * ms, TimeBetween: 5 * ms}
	if r.Time != want {
		t.Errorf("slot 0's shares %v, want %v", r.Time, want)
	}
	// Its longest gap held slot 1's prompt of 30 tokens: 1 + 120 ms; the next, slot 2's
	// of 40, 1 + 80 + 1 + 12 ms.
	if r.GapMax != 121*ms || r.GapMaxPrompts != 30 {
		t.Errorf("slot 0's longest gap %d ms held %d prompt tokens, want 121 and 30", r.GapMax/ms, r.GapMaxPrompts)
	}
	// 4 gaps of 11, 121, 13, 94 ms: a median of some 13 to 94, and the prompts held it
	// for 120 + 80 ms less one mixed decode's median pace.
	if m := r.Gaps.Median(); m < 11*ms || m > 94*ms {
		t.Errorf("median gap %d ms", m/ms)
	}
	if got, want := r.PromptStall(), 200*ms-r.Gaps.Median(); got != want {
		t.Errorf("prompt stall %d ms, want %d", got/ms, want/ms)
	}
}

// The KV cells a context's sequences hold: their highest positions, less what a rewind or
// a context shift removed; a sequence that reaches its share of the context is full.
func TestKVCells(t *testing.T) {
	f := &feed{t: New(1000 * ms)}
	settings := ggml.Params{Size: 256, SeqSize: 128, Seqs: 2}
	step := func(dur uint64, seqs ...events.SeqTokens) {
		d := &assemble.Step{PID: 1, Context: 0xc7, Start: f.now, End: f.now + dur*ms, Settings: settings}
		d.Batch.N = copy(d.Batch.Seqs[:], seqs)
		for _, s := range seqs {
			d.Tokens += int(s.Tokens)
		}
		f.now = d.End + ms
		f.out = f.t.Step(d, f.out)
		f.last = d
	}
	step(50, prompt(0, 0, 100))
	step(50, gen(0, 100), prompt(1, 0, 60))
	if m := f.last.Mix; m.KVCells != 161 || m.KVSeqMax != 101 {
		t.Fatalf("after two prompts: %d cells, the most %d; want 161, 101", m.KVCells, m.KVSeqMax)
	}
	for p := int32(101); p < 127; p++ {
		step(10, gen(0, p))
	}
	// Slot 0 holds 127 of its 128 cells: full, as llama-server stops it.
	f.t.Remove(1, f.now, 0, 0, -1)
	step(50, prompt(0, 0, 10))
	if len(f.out) != 1 || !f.out[0].Full || f.out[0].Cells != 127 || f.out[0].SeqCells != 128 {
		t.Fatalf("ended %+v, want slot 0's request full at 127 of 128 cells", f.out)
	}
	if m := f.last.Mix; m.KVCells != 70 {
		t.Errorf("after the rewind: %d cells, want 70", m.KVCells)
	}
	// A context shift on slot 1: half its cells removed, the rest moved down.
	f.t.Remove(1, f.now, 1, 4, 34)
	step(10, gen(1, 30))
	f.out = f.t.End(1, Exited, f.out[:0])
	for _, r := range f.out {
		if r.Seq == 1 && (r.Shifts != 1 || r.Full) {
			t.Errorf("slot 1: %d shifts, full %v; want one shift, not full", r.Shifts, r.Full)
		}
	}
}

// The median of a request's gaps is within a quarter octave of the true one, however
// many they are, in a fixed size.
func TestGapsMedian(t *testing.T) {
	for _, median := range []uint64{200_000, 3 * ms, 54 * ms, 1200 * ms} {
		var g Gaps
		for i := range 101 {
			g.Add(median * uint64(50+i) / 100)
		}
		if got := float64(g.Median()); math.Abs(got/float64(median)-1) > 0.1 {
			t.Errorf("median of gaps around %d ns: %v", median, got)
		}
	}
	var g Gaps
	if g.Median() != 0 {
		t.Error("a median without gaps")
	}
	g.Add(math.MaxUint64)
	g.Add(1)
	if g.Median() == 0 {
		t.Error("extreme gaps lost")
	}
}
