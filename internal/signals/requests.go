package signals

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/schema"
)

// The GenAI semantic conventions (v1.38.0) name what a request is: llama.cpp computes a
// text completion, whatever API the server put around it.
const (
	genAIOperation = schema.SpanRequest
	genAIProvider  = "llama.cpp"
)

// ModelName is the model's GGUF general.name, or "" before the model file is read.
func (p *Origin) ModelName() string {
	if p.Model == nil {
		return ""
	}
	return p.Model.Name
}

// putGenAI puts the GenAI attributes that name the operation, provider and model.
func putGenAI(a pcommon.Map, p *Origin) {
	a.PutStr(schema.GenAIOperationName, genAIOperation)
	a.PutStr(schema.GenAIProviderName, genAIProvider)
	if name := p.ModelName(); name != "" {
		a.PutStr(schema.GenAIRequestModel, name)
	}
}

// putBatch says which sequences a decode's batch carried, and how many tokens of each.
func putBatch(a pcommon.Map, b *events.Batch) {
	if b.N == 0 {
		return
	}
	ids := a.PutEmptySlice(schema.LlamaBatchSeqIDs)
	toks := a.PutEmptySlice(schema.LlamaBatchSeqTokens)
	ids.EnsureCapacity(b.N)
	toks.EnsureCapacity(b.N)
	for _, s := range b.Sequences() {
		ids.AppendEmpty().SetInt(int64(s.Seq))
		toks.AppendEmpty().SetInt(int64(s.Tokens))
	}
	if b.Flags&events.BatchNoSeq != 0 {
		a.PutBool(schema.LlamaBatchImplicitSeq, true)
	}
	if b.Flags&(events.BatchMoreSeqs|events.BatchTruncated) != 0 {
		a.PutBool(schema.LlamaBatchPartial, true)
	}
}

// putMix says what a decode's sequences did, and the KV cells its context's held after.
func putMix(a pcommon.Map, m *assemble.Mix) {
	a.PutInt(schema.LlamaBatchPromptSequences, int64(m.PromptSeqs))
	a.PutInt(schema.LlamaBatchPromptTokens, int64(m.PromptTokens))
	a.PutInt(schema.LlamaBatchNextSequences, int64(m.NextSeqs))
	a.PutInt(schema.LlamaBatchNextTokens, int64(m.NextTokens))
	if m.KVCells > 0 {
		a.PutInt(schema.LlamaKVCells, int64(m.KVCells))
		a.PutInt(schema.LlamaKVSeqCellsMax, int64(m.KVSeqMax))
	}
}

// requestTimes are the attribute keys of a request's time by share.
var requestTimes = func() (keys [requests.Shares]string) {
	for s := range requests.Shares {
		keys[s] = schema.LlamaRequestTimePrefix + s.String()
	}
	return keys
}()

// Request appends a request's span to td, as the root of its own trace, linked to the
// decode spans that computed it.
func (s *Spans) Request(td ptrace.Traces, p *Origin, r *requests.Request) {
	sp := s.scope(td, p).AppendEmpty()
	name := genAIOperation
	if model := p.ModelName(); model != "" {
		name += " " + model
	}
	s.begin(sp, s.traceID(), pcommon.NewSpanIDEmpty(), name, r.Start, r.End)
	a := sp.Attributes()
	putGenAI(a, p)
	a.PutInt(schema.GenAIUsageInputTokens, int64(r.Prompt+r.Cached))
	a.PutInt(schema.GenAIUsageCacheReadInputTokens, int64(r.Cached))
	a.PutInt(schema.GenAIUsageOutputTokens, int64(r.Output))
	a.PutInt(schema.LlamaSeqID, int64(r.Seq))
	if r.Implicit {
		a.PutBool(schema.LlamaBatchImplicitSeq, true)
	}
	if r.Warmup() {
		a.PutBool(schema.LlamaRequestWarmup, true)
	}
	a.PutInt(schema.LlamaRequestPromptTokens, int64(r.Prompt))
	if r.PrefixTokens == events.PrefixTokens {
		a.PutInt(schema.LlamaRequestPromptPrefixHash, int64(r.Prefix))
	}
	if r.Arrived != 0 {
		a.PutDouble(schema.LlamaRequestWait, float64(r.Wait())/1e9)
	}
	if r.Queued {
		a.PutBool(schema.LlamaRequestQueued, true)
	}
	if r.Output > 0 {
		a.PutDouble(schema.LlamaRequestTimeToFirstToken, float64(r.TTFT())/1e9)
	}
	if r.Output > 1 {
		a.PutDouble(schema.LlamaRequestTimePerOutputToken, float64(r.TPOT())/1e9)
		a.PutDouble(schema.LlamaRequestTimePerOutputTokenMax, float64(r.GapMax)/1e9)
		a.PutDouble(schema.LlamaRequestTimePerOutputTokenMedian, float64(r.Gaps.Median())/1e9)
		a.PutInt(schema.LlamaRequestGapMaxPromptTokens, int64(r.GapMaxPrompts))
		a.PutDouble(schema.LlamaRequestPromptStall, float64(r.PromptStall())/1e9)
	}
	for s, ns := range r.Time {
		a.PutDouble(requestTimes[s], float64(ns)/1e9)
	}
	if r.Cells > 0 {
		a.PutInt(schema.LlamaRequestKVCells, int64(r.Cells))
	}
	if r.Full {
		a.PutBool(schema.LlamaRequestContextFull, true)
	}
	if r.Shifts > 0 {
		a.PutInt(schema.LlamaRequestContextShifts, int64(r.Shifts))
	}
	a.PutInt(schema.LlamaRequestDecodes, int64(r.Decodes))
	a.PutInt(schema.LlamaRequestSharedSequencesMax, int64(r.SharedMax))
	a.PutDouble(schema.LlamaRequestSharedSequencesMean, float64(r.SharedSum)/float64(max(r.Decodes, 1)))
	a.PutStr(schema.LlamaRequestEnd, string(r.Ended))
	links := sp.Links()
	for _, l := range r.Links {
		k := links.AppendEmpty()
		k.SetTraceID(l.Trace)
		k.SetSpanID(l.Span)
	}
}
