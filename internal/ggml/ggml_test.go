package ggml

import (
	"encoding/binary"
	"testing"
)

func TestLayoutsFor(t *testing.T) {
	ls, err := layoutsFor(368, "0.25.1")
	if err != nil || len(ls) != 2 || ls[0].TensorSize != 336 {
		t.Fatalf("got %+v, %v", ls, err)
	}
	// @fugood/llama.node builds with GGML_MAX_NAME 80: the name grows, and the struct.
	ls, err = layoutsFor(384, "0.18.0")
	if err != nil || len(ls) != 2 || ls[0].TensorSize != 352 || ls[0].MaxName != 80 || ls[0].Name != 256 || ls[0].Data != 248 {
		t.Fatalf("GGML_MAX_NAME 80: got %+v, %v", ls, err)
	}
	for _, overhead := range []uint64{372, 432} { // a name not ending on a pointer's bound; past what the probes copy
		if ls, err := layoutsFor(overhead, ""); err == nil {
			t.Errorf("ggml_tensor_overhead() %d: got %+v", overhead, ls)
		}
	}
	_, err = layoutsFor(432, "")
	want := "ggml: unknown struct layout in ggml (no version): ggml_tensor_overhead() is 432 bytes; profinfer knows [368], with GGML_MAX_NAME 64, or another"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestTensorDecode(t *testing.T) {
	l := Layouts[0]
	raw := make([]byte, l.TensorSize)
	le := binary.LittleEndian
	le.PutUint32(raw[l.Type:], 2)
	le.PutUint64(raw[l.Ne:], 2048)
	le.PutUint64(raw[l.Ne+8:], 7)
	le.PutUint32(raw[l.Op:], 29)
	le.PutUint32(raw[l.OpParams:], 3)
	le.PutUint64(raw[l.Src+8:], 0xabc)
	copy(raw[l.Name:], "Qcur-3\x00junk")
	var tn Tensor
	l.Tensor(raw, &tn)
	if tn.Type != 2 || tn.Ne[0] != 2048 || tn.Ne[1] != 7 || tn.Op != 29 || tn.OpParam != 3 ||
		tn.Src[1] != 0xabc || string(tn.Name) != "Qcur-3" {
		t.Fatalf("decoded %+v", tn)
	}
	typ, ne := l.SrcHead(raw)
	if typ != 2 || ne[0] != 2048 {
		t.Fatalf("src head %d %v", typ, ne)
	}
}

func TestNames(t *testing.T) {
	n := Names{Ops: []string{"NONE", "UNARY", "GLU", "MUL_MAT"}, Types: []string{"f32", "f16"},
		Unary: []string{"ABS", "SILU"}, GLU: []string{"REGLU", "GEGLU", "SWIGLU"}}
	for _, tc := range []struct {
		op    uint32
		param int32
		want  string
	}{{3, 0, "MUL_MAT"}, {1, 1, "SILU"}, {2, 2, "SWIGLU"}, {2, 9, "GLU"}, {7, 0, "OP_7"}} {
		if got := n.Op(tc.op, tc.param); got != tc.want {
			t.Errorf("Op(%d, %d) = %q, want %q", tc.op, tc.param, got, tc.want)
		}
	}
	if n.Type(1) != "f16" || n.Type(5) != "TYPE_5" {
		t.Errorf("types: %q %q", n.Type(1), n.Type(5))
	}
}

// Sizes as ggml_nbytes gives them: contiguous f32 and q4_0 tensors, and a view whose
// rows are further apart than their length.
func TestNBytes(t *testing.T) {
	tg := &Target{Sizes: []TypeSize{0: {Block: 1, Bytes: 4}, 2: {Block: 32, Bytes: 18}}}
	for _, tc := range []struct {
		name string
		x    Tensor
		want int64
	}{
		{"f32 2048x7", Tensor{Type: 0, Ne: [4]int64{2048, 7, 1, 1}, Nb: [4]uint64{4, 8192, 57344, 57344}}, 57344},
		{"q4_0 2048x2048", Tensor{Type: 2, Ne: [4]int64{2048, 2048, 1, 1}, Nb: [4]uint64{18, 1152, 2359296, 2359296}}, 2359296},
		{"f32 view 64x3 of 128-wide rows", Tensor{Type: 0, Ne: [4]int64{64, 3, 1, 1}, Nb: [4]uint64{4, 512, 1536, 1536}}, 4 + 63*4 + 2*512},
		{"empty", Tensor{Type: 0, Ne: [4]int64{0, 1, 1, 1}}, 0},
		{"unknown type", Tensor{Type: 9, Ne: [4]int64{1, 1, 1, 1}}, 0},
	} {
		if got := tg.NBytes(&tc.x); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}

// A llama_context's fields are read at the getters' offsets from the bytes a decode sent,
// the batch sizes where the layout has them; values no live context holds are an error,
// not a resource attribute, as is a field past what was sent.
func TestContextParse(t *testing.T) {
	c := Context{NCtx: 8, NThreads: 16}
	head := make([]byte, 64)
	binary.LittleEndian.PutUint32(head[8:], 4096)
	binary.LittleEndian.PutUint32(head[16:], 4)
	binary.LittleEndian.PutUint32(head[24:], 2048)
	binary.LittleEndian.PutUint32(head[28:], 512)
	if p, err := c.Parse(head); err != nil || p != (Params{Size: 4096, Threads: 4}) {
		t.Errorf("without the batch getters: read %+v, %v; want 4096, 4 and no batch sizes", p, err)
	}
	c.NBatch, c.NUbatch, c.Batches = 24, 28, true
	if p, err := c.Parse(head); err != nil || p != (Params{Size: 4096, Threads: 4, Batch: 2048, Ubatch: 512}) {
		t.Errorf("read %+v, %v; want 4096, 4, 2048, 512", p, err)
	}
	// n_ctx_seq and n_seq_max beside n_ctx, as llama_cparams has them: four slots of 1024.
	binary.LittleEndian.PutUint32(head[12:], 1024)
	binary.LittleEndian.PutUint32(head[32:], 4)
	c.NCtxSeq, c.NSeqMax, c.Seqs = 12, 32, true
	if p, err := c.Parse(head); err != nil || p != (Params{Size: 4096, Threads: 4, Batch: 2048, Ubatch: 512, SeqSize: 1024, Seqs: 4}) {
		t.Errorf("read %+v, %v; want four slots of 1024 cells", p, err)
	}
	binary.LittleEndian.PutUint32(head[12:], 8192)
	if _, err := c.Parse(head); err == nil {
		t.Error("a sequence's 8192 cells in a context of 4096 were taken for a live context's")
	}
	binary.LittleEndian.PutUint32(head[12:], 1024)
	if n := testing.AllocsPerRun(100, func() { _, _ = c.Parse(head) }); n != 0 {
		t.Errorf("%v allocations a parse: every decode pays them", n)
	}
	binary.LittleEndian.PutUint32(head[28:], 0xffffffff)
	if _, err := c.Parse(head); err == nil {
		t.Error("an n_ubatch of -1 was taken for a live context's")
	}
	binary.LittleEndian.PutUint32(head[28:], 512)
	binary.LittleEndian.PutUint32(head[8:], 244727971)
	if _, err := c.Parse(head); err == nil {
		t.Error("an n_ctx of 244727971 was taken for a live context's")
	}
	binary.LittleEndian.PutUint32(head[8:], 4096)
	if _, err := c.Parse(head[:28]); err == nil {
		t.Error("n_ubatch past the bytes sent gave no error")
	}
	if _, err := c.Parse(make([]byte, 64)); err == nil {
		t.Error("an unreadable context (zeroes) gave no error")
	}
}
