// Package events decodes the records that profinfer's eBPF programs write to the ring
// buffer into plain Go values. Decoding reuses the caller's Event: no allocation per record.
package events

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/profinfer/profinfer/bpf"
)

// Kind says what happened.
type Kind uint16

// Event kinds: enum kind in bpf/events.bpf.h, as bpf2go generates it.
const (
	DecodeEnter = Kind(bpf.ProfinferKindEV_DECODE_ENTER)
	DecodeExit  = Kind(bpf.ProfinferKindEV_DECODE_EXIT)
	GraphEnter  = Kind(bpf.ProfinferKindEV_GRAPH_ENTER)
	GraphExit   = Kind(bpf.ProfinferKindEV_GRAPH_EXIT)
	Node        = Kind(bpf.ProfinferKindEV_NODE)
	NodeDetail  = Kind(bpf.ProfinferKindEV_NODE_DETAIL)
	Barrier     = Kind(bpf.ProfinferKindEV_BARRIER)
	ThreadExit  = Kind(bpf.ProfinferKindEV_THREAD_EXIT)
	Experts     = Kind(bpf.ProfinferKindEV_EXPERTS)
	SplitEnter  = Kind(bpf.ProfinferKindEV_SPLIT_ENTER)
	SplitExit   = Kind(bpf.ProfinferKindEV_SPLIT_EXIT)
	Copy        = Kind(bpf.ProfinferKindEV_COPY)
	CopyExit    = Kind(bpf.ProfinferKindEV_COPY_EXIT)
	SeqRm       = Kind(bpf.ProfinferKindEV_SEQ_RM)
	ThreadStart = Kind(bpf.ProfinferKindEV_THREAD_START)
	SplitNode   = Kind(bpf.ProfinferKindEV_SPLIT_NODE)
	SyncEnter   = Kind(bpf.ProfinferKindEV_SYNC_ENTER)
	SyncExit    = Kind(bpf.ProfinferKindEV_SYNC_EXIT)
	TimedNode   = Kind(bpf.ProfinferKindEV_TIMED_NODE)
	DeviceTimes = Kind(bpf.ProfinferKindEV_DEVICE_TIMES)
	SchedNew    = Kind(bpf.ProfinferKindEV_SCHED_NEW)
	StepEnter   = Kind(bpf.ProfinferKindEV_STEP_ENTER)
	StepExit    = Kind(bpf.ProfinferKindEV_STEP_EXIT)
	JobEnter    = Kind(bpf.ProfinferKindEV_JOB_ENTER)
	JobExit     = Kind(bpf.ProfinferKindEV_JOB_EXIT)
	ThreadName  = Kind(bpf.ProfinferKindEV_THREAD_NAME)
	Received    = Kind(bpf.ProfinferKindEV_RECEIVED)
	Replied     = Kind(bpf.ProfinferKindEV_REPLIED)
	lastKind    = Replied
)

var kindNames = [...]string{"", "decode_enter", "decode_exit", "graph_enter", "graph_exit", "node", "node_detail", "barrier", "thread_exit", "experts",
	"split_enter", "split_exit", "copy", "copy_exit", "seq_rm", "thread_start", "split_node", "sync_enter", "sync_exit", "timed_node", "device_times", "sched_new",
	"step_enter", "step_exit", "job_enter", "job_exit", "thread_name", "received", "replied"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k > 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// Flags on events.
const (
	FlagFused   = 1 // a node started by a fused kernel; Fused is then the second node's tensor
	FlagCounted = 2 // Counters holds the thread's perf counter values
	FlagKnown   = 4 // a Node of thread 0 whose NodeDetail came since the process last built a graph
	FlagQueued  = 1 // a Copy a device queues with its work (cpy_tensor_async)
	FlagClosed  = 1 // a Replied that is the connection's close, nothing sent
	FlagFront   = 4 // a Received or Replied of the process's front (ollama serve), not its own

	// On a DecodeEnter, what its batch leaves out.
	BatchNoPos     = 8   // no positions: llama_decode placed the tokens itself
	BatchNoSeq     = 16  // no sequence ids: every token is sequence 0's
	BatchNoOutputs = 32  // no output flags: only the last token's output was computed
	BatchMoreSeqs  = 64  // more than MaxSeqs sequences: those past it are not summed
	BatchShared    = 128 // a token of several sequences, summed into its first
	BatchTruncated = 256 // more tokens than the probe sums
)

// MaxCounters is how many perf counters a record carries.
const MaxCounters = 8

// Sizes of the records, fixed by the C structs.
const (
	HeaderSize   = 64
	TensorMax    = 384
	SrcHead      = 48
	NumSrc       = 3
	countersSize = MaxCounters * 8
	srcViewSize  = NumSrc * 8
	DetailSize   = HeaderSize + TensorMax + NumSrc*SrcHead + srcViewSize + countersSize
	CountedSize  = HeaderSize + countersSize
	GraphSize    = HeaderSize + 32
	TimesChunk   = 32  // times in a DeviceTimes record
	TimesKept    = 256 // times of one label a print sends: the newest
	LabelMax     = 256 // bytes of a label, its NUL among them
	TimesSize    = HeaderSize + LabelMax + TimesChunk*8
	TimedSize    = DetailSize + LabelMax
)

// Event is one record. Detail, Tensor and Src alias the record buffer and are only valid
// for NodeDetail, until the next Decode into the same buffer.
type Event struct {
	TS    uint64 // CLOCK_MONOTONIC nanoseconds
	PID   uint32 // thread group id, as the host sees it
	TID   uint32
	Kind  Kind
	Ith   uint16 // thread index within the graph (node events)
	Nth   uint16 // threads computing the graph
	Flags uint16
	// a and b are the record's two argument words, which mean something else for each
	// kind: the methods below name them.
	a, b uint64
	// Sched is the thread's cumulative scheduler counters (node starts and graph exits,
	// with the scheduler layer on).
	Sched CPUSched
	// Counters is the thread's perf counter values in configuration order, cumulative
	// since they were opened; set when Flags has FlagCounted.
	Counters Counters
	Detail   []byte // Tensor, Src and SrcView together
	Tensor   []byte // the node's tensor, or a copy's source
	Src      [NumSrc][]byte
	// SrcView is each source's view_src (the tensor owning its data; 0 if it owns its
	// own), little-endian; valid with Detail.
	SrcView []byte
	// Batch is a DecodeEnter's batch, summed per sequence.
	Batch Batch
	// CPU is, at GraphEnter and GraphExit, the process's threads' CPU time so far.
	CPU ThreadsCPU
	// Rows is, for Experts, Nth rows of RowBytes bytes of the ids tensor IDs, one per
	// token, each starting with the ids of the experts the router chose; Ith is the
	// tensor's rows. The record has room for more.
	Rows []byte
	// Times is, for DeviceTimes, Nth times in ns, little-endian: see DeviceTime.
	Times []byte
	// Label is, for TimedNode and DeviceTimes, the label ggml-vulkan's perf logger files
	// the node's time under, or the times' label (without its NUL).
	Label []byte
}

// Tokens is a DecodeEnter's batch size.
func (e *Event) Tokens() int { return int(int32(e.a)) }

// Context is a DecodeEnter's llama_context.
func (e *Event) Context() uint64 { return e.b }

// Result is the return value at DecodeExit, GraphExit and SplitExit.
func (e *Event) Result() int { return int(int32(e.a)) }

// Conn is the connection of a Received or Replied: a file descriptor of the process (or
// its front), or the kernel's struct sock, by the programs that saw it.
func (e *Event) Conn() uint64 { return e.a }

// Lost is, at DecodeExit and GraphExit, how many records the process lost so far.
func (e *Event) Lost() uint64 { return e.b }

// Graph is the cgraph of a GraphEnter.
func (e *Event) Graph() uint64 { return e.a }

// Nodes is the node count of a GraphEnter.
func (e *Event) Nodes() int { return int(int32(e.b)) }

// SplitNodes is a SplitEnter's node count, at most 65535.
func (e *Event) SplitNodes() int { return int(e.Ith) }

// BackendAddr is the backend of a SplitEnter or SyncEnter: which splits a wait ends.
func (e *Event) BackendAddr() uint64 { return e.b }

// Held is how many times a DeviceTimes' label holds; the record carries some of the
// newest TimesKept of them, from index First() among those on.
func (e *Event) Held() int { return int(e.a) }

// First is the index of a DeviceTimes' first time among the newest TimesKept.
func (e *Event) First() int { return int(e.Ith) }

// DeviceTime is a DeviceTimes' i-th time, i < Nth, in ns.
func (e *Event) DeviceTime(i int) uint64 { return binary.LittleEndian.Uint64(e.Times[8*i:]) }

// Tensor0 is the tensor whose computation a Node or NodeDetail starts.
func (e *Event) TensorAddr() uint64 { return e.a }

// Fused is the second tensor of a node started by a fused kernel (FlagFused), else 0.
func (e *Event) Fused() uint64 { return e.b }

// IDs is the ids tensor of an Experts record.
func (e *Event) IDs() uint64 { return e.a }

// RowBytes is the row stride of an Experts record's ids tensor.
func (e *Event) RowBytes() int { return int(e.b) }

// Backend is a SplitEnter's or SyncEnter's backend get_name function, which names the
// backend.
func (e *Event) Backend() uint64 { return e.a }

// Buffers are a Copy's source and destination buffers' get_base functions, which name
// their backends.
func (e *Event) Buffers() (src, dst uint64) { return e.a, e.b }

// Made says whether a CopyExit's copy was made, or queued; a device that could not queue
// it leaves the copy to ggml_backend_tensor_copy.
func (e *Event) Made() bool { return e.a != 0 }

// Backends is, at SchedNew, how many backends the new scheduler has, the CPU's among them.
func (e *Event) Backends() int { return int(int32(e.a)) }

// StepGraph and StepSched are a StepEnter's graph and scheduler; StepBackends is the
// scheduler's backends, the CPU's among them, and StepNodes the graph's (at most 65535).
// Its Detail describes the graph's first node.
func (e *Event) StepGraph() uint64 { return e.a }
func (e *Event) StepSched() uint64 { return e.b }
func (e *Event) StepBackends() int { return int(e.Ith) }
func (e *Event) StepNodes() int    { return int(e.Nth) }

// Samples and JobContext are a JobEnter's audio samples (16 kHz) and whisper_context.
func (e *Event) Samples() int       { return int(int32(e.a)) }
func (e *Event) JobContext() uint64 { return e.b }

// Name is the name a ThreadName's thread (TID) took.
func (e *Event) Name() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], e.a)
	binary.LittleEndian.PutUint64(b[8:], e.b)
	return string(cstring(b[:]))
}

// SeqRemoved is a SeqRm's sequence (-1: every one) and the positions [p0, p1) it
// removed; p1 < 0 removes every position from p0 on.
func (e *Event) SeqRemoved() (seq, p0, p1 int32) {
	return int32(e.a), int32(uint32(e.b)), int32(uint32(e.b >> 32))
}

// MaxSeqs is how many sequences a decode's batch is summed into.
const MaxSeqs = len(bpf.ProfinferBatch{}.Seqs)

// SeqTokens is one sequence's tokens in a decode's batch: how many, their lowest and
// highest position (-1 without positions), and how many ask for an output; and of those
// at positions under PrefixTokens (a prompt's start, computed), how many and their hashes
// summed.
type SeqTokens struct {
	Seq, Tokens, PosMin, PosMax, Outputs int32
	PrefixTokens                         int32
	Prefix                               uint32
}

// PrefixTokens is how many of a prompt's first tokens are hashed (PREFIX_TOKENS in
// bpf/events.bpf.h).
const PrefixTokens = 64

// CtxHead is how many bytes of its llama_context a decode sends.
const CtxHead = len(bpf.ProfinferBatch{}.CtxHead)

// Batch is a decode's batch summed per sequence: N entries of Seqs, and the Batch* flags;
// and the first bytes of its llama_context as they were at the decode (zeroes where they
// could not be read), its settings among them (ggml.Context.Parse).
type Batch struct {
	N       int
	Flags   uint16
	Seqs    [MaxSeqs]SeqTokens
	Context [CtxHead]byte
}

// Sequences returns the batch's sequences.
func (b *Batch) Sequences() []SeqTokens { return b.Seqs[:b.N] }

// ThreadsCPU is the CPU time of a process's threads so far, summed over them: a running
// thread's share is as of its last scheduler tick or switch.
type ThreadsCPU struct {
	Run     uint64 // nanoseconds on a CPU
	Wait    uint64 // nanoseconds runnable, waiting for a CPU; 0 where the kernel does not count it
	MajFlt  uint64 // major page faults: each a wait for the disk
	Threads uint32 // threads summed
	Partial bool   // the process had more threads than the probe sums
}

// Counters is one reading of a thread's perf counters.
type Counters [MaxCounters]uint64

// Sub returns c minus an earlier reading.
func (c Counters) Sub(earlier Counters) Counters {
	for i := range c {
		c[i] -= earlier[i]
	}
	return c
}

// Add adds d to c.
func (c *Counters) Add(d Counters) {
	for i := range c {
		c[i] += d[i]
	}
}

// CPUSched is what the CPU scheduler did to a thread, cumulative.
type CPUSched struct {
	OffCPU, RunQueue        uint64 // nanoseconds switched out; of those, runnable but waiting
	Preemptions, Migrations uint32
}

// Sub returns s minus an earlier reading.
func (s CPUSched) Sub(earlier CPUSched) CPUSched {
	return CPUSched{s.OffCPU - earlier.OffCPU, s.RunQueue - earlier.RunQueue,
		s.Preemptions - earlier.Preemptions, s.Migrations - earlier.Migrations}
}

// Parse parses one ring-buffer record into e.
func Parse(b []byte, e *Event) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("events: record of %d bytes is shorter than the %d-byte header", len(b), HeaderSize)
	}
	le := binary.LittleEndian
	e.TS = le.Uint64(b[0:])
	e.PID = le.Uint32(b[8:])
	e.TID = le.Uint32(b[12:])
	e.Kind = Kind(le.Uint16(b[16:]))
	e.Ith = le.Uint16(b[18:])
	e.Nth = le.Uint16(b[20:])
	e.Flags = le.Uint16(b[22:])
	e.a = le.Uint64(b[24:])
	e.b = le.Uint64(b[32:])
	e.Sched = CPUSched{OffCPU: le.Uint64(b[40:]), RunQueue: le.Uint64(b[48:]),
		Preemptions: le.Uint32(b[56:]), Migrations: le.Uint32(b[60:])}
	e.Detail, e.Tensor, e.SrcView, e.Rows, e.Times, e.Label = nil, nil, nil, nil, nil, nil
	e.Src = [NumSrc][]byte{}
	if e.Kind < DecodeEnter || e.Kind > lastKind {
		return fmt.Errorf("events: unknown kind %d", uint16(e.Kind))
	}
	switch e.Kind {
	case DecodeEnter:
		return decodeBatch(b, e)
	case GraphEnter, GraphExit:
		if len(b) < GraphSize {
			return fmt.Errorf("events: %s of %d bytes, want %d", e.Kind, len(b), GraphSize)
		}
		e.CPU = ThreadsCPU{Run: le.Uint64(b[HeaderSize:]), Wait: le.Uint64(b[HeaderSize+8:]), MajFlt: le.Uint64(b[HeaderSize+16:]),
			Threads: le.Uint32(b[HeaderSize+24:]), Partial: le.Uint32(b[HeaderSize+28:]) != 0}
		return nil
	}
	if e.Kind == Experts {
		n := uint64(e.Nth) * e.b
		if e.b == 0 || uint64(len(b)-HeaderSize) < n {
			return fmt.Errorf("events: experts record of %d bytes for %d rows of %d", len(b), e.Nth, e.b)
		}
		e.Rows = b[HeaderSize : HeaderSize+n]
		return nil
	}
	if e.Kind == DeviceTimes {
		if len(b) < TimesSize || e.Nth > TimesChunk {
			return fmt.Errorf("events: device times of %d bytes for %d times", len(b), e.Nth)
		}
		e.Label = cstring(b[HeaderSize : HeaderSize+LabelMax])
		e.Times = b[HeaderSize+LabelMax : HeaderSize+LabelMax+8*int(e.Nth)]
		return nil
	}
	if e.Kind == TimedNode {
		if len(b) < TimedSize {
			return fmt.Errorf("events: %s of %d bytes, want %d", e.Kind, len(b), TimedSize)
		}
		e.Label = cstring(b[DetailSize:TimedSize])
	}
	ctr := HeaderSize // where the counters are, if any
	if e.Kind == NodeDetail || e.Kind == Copy || e.Kind == SplitNode || e.Kind == TimedNode || e.Kind == StepEnter {
		if len(b) < DetailSize {
			return fmt.Errorf("events: %s of %d bytes, want %d", e.Kind, len(b), DetailSize)
		}
		ctr = DetailSize - countersSize
		e.Detail = b[HeaderSize:ctr]
		e.Tensor = b[HeaderSize : HeaderSize+TensorMax]
		for i := range e.Src {
			off := HeaderSize + TensorMax + i*SrcHead
			e.Src[i] = b[off : off+SrcHead]
		}
		e.SrcView = b[ctr-srcViewSize : ctr]
	}
	if e.Flags&FlagCounted != 0 {
		if len(b) < ctr+countersSize {
			return fmt.Errorf("events: %s with counters of %d bytes, want %d", e.Kind, len(b), ctr+countersSize)
		}
		for i := range e.Counters {
			e.Counters[i] = le.Uint64(b[ctr+8*i:])
		}
	}
	return nil
}

// cstring is b up to its first NUL.
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// seqTokensSize is the size of one struct seq_tokens.
const seqTokensSize = 28

// decodeBatch reads a DecodeEnter's context head after the header, then its sequences,
// Nth of them.
func decodeBatch(b []byte, e *Event) error {
	n := int(e.Nth)
	if n > MaxSeqs || len(b) < HeaderSize+CtxHead+n*seqTokensSize {
		return fmt.Errorf("events: decode entry of %d bytes for %d sequences", len(b), n)
	}
	le := binary.LittleEndian
	e.Batch.N, e.Batch.Flags = n, e.Flags
	copy(e.Batch.Context[:], b[HeaderSize:])
	for i := range n {
		r := b[HeaderSize+CtxHead+i*seqTokensSize:]
		e.Batch.Seqs[i] = SeqTokens{Seq: int32(le.Uint32(r[0:])), Tokens: int32(le.Uint32(r[4:])),
			PosMin: int32(le.Uint32(r[8:])), PosMax: int32(le.Uint32(r[12:])), Outputs: int32(le.Uint32(r[16:])),
			PrefixTokens: int32(le.Uint32(r[20:])), Prefix: le.Uint32(r[24:])}
	}
	return nil
}
