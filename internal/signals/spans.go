// Package signals turns assembled decodes and graphs into OpenTelemetry pdata: spans for
// llama_decode, graph computations and graph nodes, and cumulative per-op metrics.
package signals

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/roofline"
)

// Origin is the process a span or metric comes from: its resource.
type Origin struct {
	PID, VPID int
	Exe       string // as the process sees it
	BuildID   string
	GGML      string      // ggml_version(); empty for releases without one
	Container string      // container.id; empty outside containers
	Backends  string      // GGML backends besides the CPU's it loaded as libraries, comma-separated
	Runtime   string      // ggml.runtime: llama.cpp, whisper.cpp, ollama or ggml
	Software  string      // ggml.device.software: the software driver its device runs on
	Model     *model.Info // nil until the process has loaded one
	// Whisper is its whisper.cpp model, nil until its first transcription was read.
	Whisper *model.Whisper
	// CtxSize, CtxThreads, CtxBatch and CtxUbatch are its first llama_context's n_ctx,
	// n_threads, n_batch and n_ubatch (each decode's own are on its span); 0 until a
	// decode showed them, and the batch sizes where the release has no getters for them.
	CtxSize, CtxThreads, CtxBatch, CtxUbatch int
	// LlamaBuild and LlamaCommit are llama.cpp's LLAMA_BUILD_NUMBER and LLAMA_COMMIT; 0
	// and "" where no object it maps records them.
	LlamaBuild  int
	LlamaCommit string
	CPUVariant  string // ggml.cpu.variant, from its CPU backend's library's name; "" where that names none
	// SIMD and HostSIMD are ggml.cpu.simd and host.cpu.simd: the SIMD its CPU backend was
	// built for and the CPU's, on internal/simd's scale; "" where unknown.
	SIMD, HostSIMD string
	OSVersion      string // the kernel release (uname -r) of the collector's host, which the process runs on
}

// Resource is p's resource with the semantic-convention attributes rb's configuration
// enables (resource_attributes.<name>.enabled).
func (p *Origin) Resource(rb *metadata.ResourceBuilder) pcommon.Resource {
	name := p.Exe[strings.LastIndexByte(p.Exe, '/')+1:]
	rb.SetServiceName(name)
	rb.SetProcessPid(int64(p.PID))
	rb.SetProcessVpid(int64(p.VPID))
	rb.SetProcessExecutablePath(p.Exe)
	rb.SetProcessExecutableName(name)
	if p.BuildID != "" {
		rb.SetProcessExecutableBuildIDGnu(p.BuildID)
	}
	if p.GGML != "" {
		rb.SetGgmlVersion(p.GGML)
	}
	if p.Container != "" {
		rb.SetContainerID(p.Container)
	}
	if p.Runtime != "" {
		rb.SetGgmlRuntime(p.Runtime)
	}
	if w := p.Whisper; w != nil {
		rb.SetWhisperModelType(w.Type)
		rb.SetWhisperModelVocabulary(int64(w.Vocab))
		rb.SetWhisperModelAudioContext(int64(w.AudioCtx))
		rb.SetWhisperModelAudioState(int64(w.AudioState))
		rb.SetWhisperModelAudioHeads(int64(w.AudioHeads))
		rb.SetWhisperModelAudioLayers(int64(w.AudioLayers))
		rb.SetWhisperModelTextContext(int64(w.TextCtx))
		rb.SetWhisperModelTextState(int64(w.TextState))
		rb.SetWhisperModelTextHeads(int64(w.TextHeads))
		rb.SetWhisperModelTextLayers(int64(w.TextLayers))
		rb.SetWhisperModelMels(int64(w.Mels))
		rb.SetWhisperModelFileType(w.FileType)
	}
	if p.Backends != "" {
		var loaded []any
		for b := range strings.SplitSeq(p.Backends, ",") {
			loaded = append(loaded, b)
		}
		rb.SetGgmlBackendsLoaded(loaded)
	}
	if p.Software != "" {
		rb.SetGgmlDeviceSoftware(p.Software)
	}
	if m := p.Model; m != nil {
		rb.SetLlamaModelPath(m.Path)
		rb.SetLlamaModelName(m.Name)
		rb.SetLlamaModelArchitecture(m.Architecture)
		rb.SetLlamaModelParameters(int64(m.Parameters))
		rb.SetLlamaModelFileType(m.FileType)
		rb.SetLlamaModelContextLength(int64(m.ContextLength))
	}
	if p.CtxSize > 0 {
		rb.SetLlamaContextSize(int64(p.CtxSize))
	}
	if p.CtxThreads > 0 {
		rb.SetLlamaContextThreads(int64(p.CtxThreads))
	}
	if p.CtxBatch > 0 {
		rb.SetLlamaContextBatchSize(int64(p.CtxBatch))
	}
	if p.CtxUbatch > 0 {
		rb.SetLlamaContextUbatchSize(int64(p.CtxUbatch))
	}
	if p.LlamaBuild > 0 {
		rb.SetLlamaBuildNumber(int64(p.LlamaBuild))
	}
	if p.LlamaCommit != "" {
		rb.SetLlamaBuildCommit(p.LlamaCommit)
	}
	if p.CPUVariant != "" {
		rb.SetGgmlCPUVariant(p.CPUVariant)
	}
	if p.SIMD != "" {
		rb.SetGgmlCPUSimd(p.SIMD)
	}
	if p.HostSIMD != "" {
		rb.SetHostCPUSimd(p.HostSIMD)
	}
	rb.SetOsType("linux") // the only OS profinfer runs on
	if p.OSVersion != "" {
		rb.SetOsVersion(p.OSVersion)
	}
	return rb.Emit()
}

// Clock converts kernel CLOCK_MONOTONIC nanoseconds to wall-clock time, with an offset
// taken once at start, as eBPF timestamps are monotonic.
type Clock struct{ Offset int64 }

// Time converts a monotonic timestamp.
func (c Clock) Time(mono uint64) pcommon.Timestamp {
	return pcommon.Timestamp(uint64(int64(mono) + c.Offset))
}

// Spans builds traces. It is not safe for concurrent use.
type Spans struct {
	Clock    Clock
	Nodes    bool           // emit a span per node, not only decode and graph spans
	Peaks    roofline.Peaks // classify nodes under this roofline; zero: do not
	Counters *Counters      // the perf counters nodes carry; nil: none
	// Resources says which resource attributes spans carry, all by default; set it
	// before the first span.
	Resources metadata.ResourceAttributesConfig
	rb        *metadata.ResourceBuilder // of Resources, made at first use; Emit resets it
	rng       *rand.PCG
	batch     ptrace.Traces          // the traces scopes are in
	scopes    map[*Origin]scopeSpans // each process's spans in batch
}

// scopeSpans is a process's span slice in a batch, and what its resource was made from.
type scopeSpans struct {
	origin Origin
	spans  ptrace.SpanSlice
}

// NewSpans returns a span builder.
func NewSpans(clock Clock, nodes bool, peaks roofline.Peaks, counters *Counters) *Spans {
	return &Spans{Clock: clock, Nodes: nodes, Peaks: peaks, Counters: counters,
		Resources: metadata.DefaultResourceAttributesConfig(), scopes: map[*Origin]scopeSpans{},
		rng: rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15)}
}

func (s *Spans) traceID() pcommon.TraceID {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], s.rng.Uint64())
	binary.LittleEndian.PutUint64(id[8:], s.rng.Uint64())
	return id
}

func (s *Spans) spanID() pcommon.SpanID {
	var id [8]byte
	binary.LittleEndian.PutUint64(id[:], s.rng.Uint64()|1)
	return id
}

// scope returns the span slice for process p in td, adding its resource on first use: one
// a process a batch while p stays the same. A token's spans are few, and its resource
// as many attributes again.
func (s *Spans) scope(td ptrace.Traces, p *Origin) ptrace.SpanSlice {
	if s.batch != td {
		s.batch = td
		clear(s.scopes)
	}
	if sc, ok := s.scopes[p]; ok && sc.origin == *p {
		return sc.spans
	}
	rs := td.ResourceSpans().AppendEmpty()
	if s.rb == nil {
		s.rb = metadata.NewResourceBuilder(s.Resources)
	}
	p.Resource(s.rb).MoveTo(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName) // the metrics' scope too
	s.scopes[p] = scopeSpans{origin: *p, spans: ss.Spans()}
	return ss.Spans()
}

// decodeAttrs and graphAttrs are the most attributes a decode span and a graph span without
// node spans get, so that each map is allocated once: every token makes one of each.
const (
	decodeAttrs = 22
	graphAttrs  = 11
)

// begin gives sp its identity, name and extent.
func (s *Spans) begin(sp ptrace.Span, trace pcommon.TraceID, parent pcommon.SpanID, name string, start, end uint64) {
	sp.SetTraceID(trace)
	sp.SetSpanID(s.spanID())
	sp.SetParentSpanID(parent)
	sp.SetName(name)
	sp.SetStartTimestamp(s.Clock.Time(start))
	sp.SetEndTimestamp(s.Clock.Time(end))
}
