package profiler

import (
	"encoding/binary"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/signals"
)

// testIngest is a reader's ingest with what its sink needs, and no kernel: spans, metrics,
// requests and a queue of 64 batches for the pipeline (out); node spans if nodeSpans.
func testIngest(nodeSpans bool) (in *ingest, out chan ptrace.Traces) {
	set := receivertest.NewNopSettings(metadata.Type)
	ctr := signals.NewCounters(nil)
	out = make(chan ptrace.Traces, 64)
	return newIngest(&Config{SampleEvery: 1}, set.Logger, true, false, out,
		signals.NewSpans(signals.Clock{}, nodeSpans, roofline.Peaks{}, ctr),
		signals.NewMetrics(metadata.DefaultMetricsBuilderConfig(), set, roofline.Roofs{}, ctr)), out
}

// While a process's new context is read, its decodes wait, up to maxHeld; past it they
// are exported without waiting, and the release once it is read exports every held one.
// No kernel needed.
func TestHeldDecodesBounded(t *testing.T) {
	in, out := testIngest(true)
	tr := &inProc{proc: signals.Origin{PID: 7, Exe: "/usr/bin/llama-server"}, looking: true}
	in.procs[7] = tr
	s := sink{in}
	const decodes = maxHeld + 44
	for i := range decodes {
		s.Step(&assemble.Step{PID: 7, TID: 7, Tokens: 1, Start: uint64(10 * i), End: uint64(10*i + 5)})
	}
	if len(tr.held) != maxHeld || in.pending.SpanCount() != decodes-maxHeld {
		t.Fatalf("%d decodes held, %d exported; want %d held, the rest exported", len(tr.held), in.pending.SpanCount(), maxHeld)
	}
	tr.looking = false
	in.release(tr)
	spans := in.pending.SpanCount()
	for len(out) > 0 {
		spans += (<-out).SpanCount()
	}
	if len(tr.held) != 0 || spans != decodes {
		t.Errorf("released: %d held, %d spans; want none held and %d spans", len(tr.held), spans, decodes)
	}
}

// Decodes carry each its own context's settings, from the bytes of it each sent (llama-
// bench makes a context per test, the next often at the freed one's address), held or
// not; the resource the first context's; and none where the bytes are no live context's.
func TestDecodesTheirContext(t *testing.T) {
	in, _ := testIngest(false)
	fields := ggml.Context{NCtx: 8, NThreads: 40, NBatch: 16, NUbatch: 20, Batches: true}
	tr := &inProc{proc: signals.Origin{PID: 7, Exe: "/usr/bin/llama-bench"}, looking: true, ctxFields: &fields}
	in.procs[7] = tr
	s := sink{in}
	pp, tg := ggml.Params{Size: 16, Threads: 2, Batch: 16, Ubatch: 16}, ggml.Params{Size: 48, Threads: 2, Batch: 48, Ubatch: 48}
	decode := func(p ggml.Params, tokens int, start uint64) *assemble.Step {
		d := &assemble.Step{PID: 7, TID: 7, Tokens: tokens, Context: 0x1000, Start: start, End: start + 10}
		for off, v := range map[uint64]int{fields.NCtx: p.Size, fields.NThreads: p.Threads, fields.NBatch: p.Batch, fields.NUbatch: p.Ubatch} {
			binary.LittleEndian.PutUint32(d.Batch.Context[off:], uint32(v))
		}
		return d
	}
	s.Step(decode(pp, 16, 10))
	s.Step(decode(tg, 1, 30))
	tr.looking = false
	in.release(tr)
	rs := in.pending.ResourceSpans()
	if rs.Len() != 1 {
		t.Fatalf("%d resources, want 1: the resource keeps the first context's", rs.Len())
	}
	if v, _ := rs.At(0).Resource().Attributes().Get(schema.ResourceLlamaContextBatchSize); v.Int() != 16 {
		t.Errorf("resource batch size %d, want the first context's 16", v.Int())
	}
	s.Step(decode(ggml.Params{}, 1, 50)) // freed and zeroed
	spans := rs.At(0).ScopeSpans().At(0).Spans()
	for i, want := range []ggml.Params{pp, tg, {}} {
		a := spans.At(i).Attributes()
		got := ggml.Params{Size: int(schema.Int(a, schema.LlamaContextSize)),
			Batch: int(schema.Int(a, schema.LlamaContextBatchSize)), Ubatch: int(schema.Int(a, schema.LlamaContextUbatchSize))}
		if want.Threads = 0; got != want { // a context's threads are not the decode's to say
			t.Errorf("decode %d carries %+v, want its context's %+v", i, got, want)
		}
	}
}

// A context seen before is not looked at again when the process comes back to it (a draft
// model's and its target's alternate), unless a scheduler was made since: a new context
// may take a freed one's address.
func TestContextReadOnce(t *testing.T) {
	in, _ := testIngest(false)
	tr := &inProc{proc: signals.Origin{PID: 7, Exe: "/usr/bin/llama-server"}}
	reads := func() int {
		n := 0
		for _, e := range in.effects {
			if e.kind == contextSeen {
				n++
			}
		}
		in.effects = in.effects[:0]
		return n
	}
	for _, ctx := range []uint64{0x1000, 0x2000} {
		in.decodesWith(tr, ctx)
		tr.looking = false
	}
	if n := reads(); n != 2 {
		t.Fatalf("%d reads of two new contexts", n)
	}
	for range 3 {
		in.decodesWith(tr, 0x1000)
		in.decodesWith(tr, 0x2000)
	}
	if n := reads(); n != 0 || tr.ctx != 0x2000 {
		t.Errorf("%d reads alternating between two contexts read before (latest %#x)", n, tr.ctx)
	}
	tr.reread = true // a scheduler made: a new context, at an old address
	in.decodesWith(tr, 0x1000)
	if n := reads(); n != 1 || tr.reread || !tr.looking {
		t.Errorf("after a scheduler was made: %d reads, reread %v, looking %v; want one read", n, tr.reread, tr.looking)
	}
}
