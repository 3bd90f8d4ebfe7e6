package profiler

import (
	"testing"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/signals"
)

// A generating request is idle by the records read, not by the clock: the reader wakes
// with up to a tick of records in the ring, and its next decode may be among them. Once
// the ring is drained, the clock is the stream's, and the request is idle. No kernel
// needed.
func TestRequestIdleByRecordsRead(t *testing.T) {
	in, _ := testIngest(false)
	in.procs[7] = &inProc{proc: signals.Origin{PID: 7, Exe: "/usr/bin/llama-cli"}}
	s := sink{in}
	t0 := monotonic() - 3*uint64(requestIdle) // the decodes were long ago by the clock
	for i, sq := range []events.SeqTokens{
		{Tokens: 8, PosMax: 7, Outputs: 1},            // the prompt
		{Tokens: 1, PosMin: 8, PosMax: 8, Outputs: 1}, // a token fed back
	} {
		d := &assemble.Step{PID: 7, TID: 7, Context: 0xc7, Tokens: int(sq.Tokens), Start: t0 + uint64(i)*50e6, End: t0 + uint64(i)*50e6 + 40e6}
		d.Batch.N = copy(d.Batch.Seqs[:], []events.SeqTokens{sq})
		s.Step(d)
	}
	in.read = t0 + 200e6 // the ring holds what came after
	in.sweepRequests()
	if len(in.ended) != 0 {
		t.Fatalf("request ended %q with the ring read to 0.1 s after its last decode", in.ended[0].Ended)
	}
	in.caughtUp()
	in.sweepRequests()
	if len(in.ended) != 1 || in.ended[0].Ended != "idle" || in.ended[0].Output != 2 {
		t.Fatalf("drained, %d requests ended (%+v); want the one, idle, with its 2 tokens", len(in.ended), in.ended)
	}
}
