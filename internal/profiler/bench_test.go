package profiler

import (
	"testing"

	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/signals"
)

// BenchmarkToken is the reader's work for a token of llama-server under the default
// configuration, outside any window: a decode of one token and its one graph assembled,
// counted, made spans and followed for its request, and a second's spans handed over
// every 60 tokens.
func BenchmarkToken(b *testing.B) {
	in, out := testIngest(false)
	in.procs[7] = &inProc{proc: signals.Origin{PID: 7, Exe: "/usr/bin/llama-server"}}
	batch := events.Batch{N: 1}
	ts := uint64(1e9)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		batch.Seqs[0] = events.SeqTokens{Tokens: 1, PosMin: int32(i % 1000), PosMax: int32(i % 1000), Outputs: 1}
		in.asm.DecodeEnter(7, 7, ts, 1, 0x1000, &batch)
		in.asm.GraphEnter(7, 7, ts+10_000, 0x2000, 1100, 2, events.ThreadsCPU{Run: ts, Threads: 3})
		in.asm.GraphExit(7, 7, ts+15_000_000, events.CPUSched{}, 0, events.ThreadsCPU{Run: ts + 30_000_000, Threads: 3})
		in.asm.DecodeExit(7, 7, ts+15_100_000, 0, 0)
		ts += 16_000_000
		if i%60 == 59 {
			in.handOver()
			<-out
		}
	}
}
