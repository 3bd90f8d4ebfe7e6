package events

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/profinfer/profinfer/bpf"
)

// The Go constants match the C structs that bpf2go saw.
func TestSizesMatchBPF(t *testing.T) {
	if s := unsafe.Sizeof(bpf.ProfinferEvent{}); s != HeaderSize {
		t.Fatalf("struct event is %d bytes, HeaderSize is %d", s, HeaderSize)
	}
	if s := unsafe.Sizeof(bpf.ProfinferDetail{}); s != DetailSize {
		t.Fatalf("struct detail is %d bytes, DetailSize is %d", s, DetailSize)
	}
	if s := unsafe.Sizeof(bpf.ProfinferGraphRecord{}); s != GraphSize {
		t.Fatalf("struct graph_record is %d bytes, GraphSize is %d", s, GraphSize)
	}
	if s := unsafe.Sizeof(bpf.ProfinferCounted{}); s != CountedSize {
		t.Fatalf("struct counted is %d bytes, CountedSize is %d", s, CountedSize)
	}
	if s := unsafe.Sizeof(bpf.ProfinferDeviceTimes{}); s != TimesSize {
		t.Fatalf("struct device_times is %d bytes, TimesSize is %d", s, TimesSize)
	}
	if s := unsafe.Sizeof(bpf.ProfinferTimedNode{}); s != TimedSize {
		t.Fatalf("struct timed_node is %d bytes, TimedSize is %d", s, TimedSize)
	}
}

func TestParseDeviceTimes(t *testing.T) {
	b := make([]byte, TimesSize)
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(DeviceTimes))
	le.PutUint16(b[18:], 32) // first
	le.PutUint16(b[20:], 2)  // times here
	le.PutUint64(b[24:], 300)
	copy(b[HeaderSize:], "MUL_MAT_VEC q4_0\x00stale")
	le.PutUint64(b[HeaderSize+LabelMax+8:], 1234)
	var e Event
	if err := Parse(b, &e); err != nil || e.Held() != 300 || string(e.Label) != "MUL_MAT_VEC q4_0" || e.First() != 32 || e.Nth != 2 || e.DeviceTime(1) != 1234 {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	le.PutUint16(b[20:], TimesChunk+1)
	if err := Parse(b, &e); err == nil {
		t.Fatal("a record of more times than it holds decoded")
	}
	n := make([]byte, TimedSize)
	le.PutUint16(n[16:], uint16(TimedNode))
	copy(n[DetailSize:], "ADD\x00")
	if err := Parse(n, &e); err != nil || string(e.Label) != "ADD" || len(e.Tensor) != TensorMax {
		t.Fatalf("timed node decoded %q, %v", e.Label, err)
	}
	if err := Parse(n[:DetailSize], &e); err == nil {
		t.Fatal("a timed node without its label decoded")
	}
}

func TestParse(t *testing.T) {
	b := make([]byte, DetailSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], 123)
	le.PutUint32(b[8:], 10)
	le.PutUint32(b[12:], 11)
	le.PutUint16(b[16:], uint16(NodeDetail))
	le.PutUint16(b[20:], 2)
	le.PutUint16(b[22:], FlagFused|FlagCounted)
	le.PutUint64(b[24:], 0xdead)
	le.PutUint64(b[32:], 0xbeef)
	le.PutUint64(b[40:], 500)
	le.PutUint64(b[48:], 200)
	le.PutUint32(b[56:], 3)
	le.PutUint32(b[60:], 1)
	b[HeaderSize] = 7
	b[HeaderSize+TensorMax+SrcHead] = 9
	le.PutUint64(b[DetailSize-countersSize:], 41)
	le.PutUint64(b[DetailSize-countersSize-8:], 0xfeed) // the third source's view_src
	le.PutUint64(b[DetailSize-8:], 48)
	var e Event
	if err := Parse(b, &e); err != nil {
		t.Fatal(err)
	}
	if e.TS != 123 || e.PID != 10 || e.TID != 11 || e.Kind != NodeDetail || e.Nth != 2 ||
		e.Flags != FlagFused|FlagCounted || e.Counters[0] != 41 || le.Uint64(e.SrcView[16:]) != 0xfeed || e.Counters[MaxCounters-1] != 48 || e.TensorAddr() != 0xdead || e.Fused() != 0xbeef || e.Tensor[0] != 7 || e.Src[1][0] != 9 ||
		e.Sched != (CPUSched{OffCPU: 500, RunQueue: 200, Preemptions: 3, Migrations: 1}) {
		t.Fatalf("decoded %+v", e)
	}
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{b[:10], "events: record of 10 bytes is shorter than the 64-byte header"},
		{b[:HeaderSize], "events: node_detail of 64 bytes, want 680"},
		{make([]byte, HeaderSize), "events: unknown kind 0"},
		{counted(Node, HeaderSize), "events: node with counters of 64 bytes, want 128"},
	} {
		if err := Parse(tc.in, &e); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// counted is a record of n bytes, of kind k, flagged as carrying counters.
func counted(k Kind, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint16(b[16:], uint16(k))
	binary.LittleEndian.PutUint16(b[22:], FlagCounted)
	return b
}

func TestParseCounted(t *testing.T) {
	b := counted(ThreadExit, CountedSize)
	binary.LittleEndian.PutUint64(b[HeaderSize+8:], 7)
	var e Event
	if err := Parse(b, &e); err != nil || e.Kind != ThreadExit || e.Counters[1] != 7 {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	c := Counters{5, 10}
	c.Add(Counters{1, 2})
	if d := c.Sub(Counters{2, 4}); d != (Counters{4, 8}) {
		t.Fatalf("%v", d)
	}
}

func TestParseExperts(t *testing.T) {
	b := make([]byte, HeaderSize+512)
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(Experts))
	le.PutUint16(b[18:], 3) // rows of the tensor
	le.PutUint16(b[20:], 2) // rows copied
	le.PutUint64(b[24:], 0x1d5)
	le.PutUint64(b[32:], 32) // row stride
	b[HeaderSize+32] = 5
	var e Event
	if err := Parse(b, &e); err != nil || e.Kind != Experts || e.IDs() != 0x1d5 || e.Ith != 3 || len(e.Rows) != 64 || e.Rows[32] != 5 {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	want := "events: experts record of 80 bytes for 2 rows of 32"
	if err := Parse(b[:HeaderSize+64], &e); err != nil || len(e.Rows) != 64 {
		t.Fatalf("decoded %d bytes of rows, %v", len(e.Rows), err)
	}
	if err := Parse(b[:HeaderSize+16], &e); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestParseGraph(t *testing.T) {
	b := make([]byte, GraphSize)
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(GraphExit))
	le.PutUint64(b[HeaderSize:], 9000)
	le.PutUint64(b[HeaderSize+8:], 300)
	le.PutUint64(b[HeaderSize+16:], 7)
	le.PutUint32(b[HeaderSize+24:], 3)
	le.PutUint32(b[HeaderSize+28:], 1)
	var e Event
	if err := Parse(b, &e); err != nil || e.CPU != (ThreadsCPU{Run: 9000, Wait: 300, MajFlt: 7, Threads: 3, Partial: true}) {
		t.Fatalf("decoded %+v, %v", e.CPU, err)
	}
	want := "events: graph_exit of 64 bytes, want 96"
	if err := Parse(b[:HeaderSize], &e); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestSchedSub(t *testing.T) {
	a := CPUSched{OffCPU: 10, RunQueue: 4, Preemptions: 2, Migrations: 1}
	b := CPUSched{OffCPU: 25, RunQueue: 9, Preemptions: 5, Migrations: 1}
	if d := b.Sub(a); d != (CPUSched{15, 5, 3, 0}) {
		t.Fatalf("%+v", d)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(make([]byte, DetailSize))
	f.Add([]byte{1, 2, 3})
	for k := DecodeEnter; k <= lastKind; k++ { // a record of every kind, with and without counters
		for _, flags := range []uint16{0, FlagCounted} {
			b := make([]byte, DetailSize)
			binary.LittleEndian.PutUint16(b[16:], uint16(k))
			binary.LittleEndian.PutUint16(b[20:], 2) // nth: rows, for experts
			binary.LittleEndian.PutUint16(b[22:], flags)
			binary.LittleEndian.PutUint64(b[32:], 16) // b: row stride, for experts
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		_ = Parse(b, &e)
	})
}

// A decode's record: the header, its context's first bytes, then its sequences.
func TestDecodeEnter(t *testing.T) {
	le := binary.LittleEndian
	b := make([]byte, HeaderSize+CtxHead+2*seqTokensSize)
	le.PutUint16(b[16:], uint16(DecodeEnter))
	le.PutUint16(b[20:], 2) // nth: sequences
	le.PutUint32(b[HeaderSize+8:], 4096)
	for i, seq := range []uint32{3, 5} {
		r := b[HeaderSize+CtxHead+i*seqTokensSize:]
		le.PutUint32(r, seq)
		le.PutUint32(r[4:], 10*seq)
	}
	var e Event
	if err := Parse(b, &e); err != nil {
		t.Fatal(err)
	}
	if got := le.Uint32(e.Batch.Context[8:]); got != 4096 {
		t.Errorf("the context's bytes read %d at 8, want 4096", got)
	}
	if s := e.Batch.Sequences(); len(s) != 2 || s[0].Seq != 3 || s[1].Tokens != 50 {
		t.Errorf("sequences %+v, want 3 and 5 of 30 and 50 tokens", s)
	}
	if err := Parse(b[:len(b)-1], &e); err == nil {
		t.Error("a record short of its last sequence parsed")
	}
}
