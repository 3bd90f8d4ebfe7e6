package describe

import (
	"encoding/binary"
	"testing"

	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/ggml"
)

// target is a ggml with the ops and types the tests use, in layout l.
func target(l ggml.Layout) *ggml.Target {
	return &ggml.Target{
		Layout: l,
		Names:  ggml.Names{Ops: []string{"NONE", "ADD", "MUL", "MUL_MAT"}, Types: []string{"f32", "f16", "q4_0"}},
		Sizes:  []ggml.TypeSize{{Block: 1, Bytes: 4}, {Block: 1, Bytes: 2}, {Block: 32, Bytes: 18}},
	}
}

// tensor is what a record says of one tensor.
type tensor struct {
	typ  uint32
	ne   [4]int64
	op   uint32
	name string
	src  []uint64
	view uint64
}

// record builds the ring-buffer record of a node start (kind, tensor address addr) with
// the detail of t and the heads of its sources srcs, laid out as l has them.
func record(kind events.Kind, flags uint16, addr uint64, l ggml.Layout, t tensor, srcs []tensor, views []uint64) []byte {
	le := binary.LittleEndian
	b := make([]byte, events.DetailSize)
	le.PutUint16(b[16:], uint16(kind))
	le.PutUint16(b[22:], flags)
	le.PutUint64(b[24:], addr)
	if kind == events.Node {
		return b[:events.HeaderSize]
	}
	head := func(raw []byte, t tensor) { // what a source's head holds
		le.PutUint32(raw[l.Type:], t.typ)
		for i, n := range t.ne {
			le.PutUint64(raw[l.Ne+8*i:], uint64(n))
		}
	}
	raw := b[events.HeaderSize : events.HeaderSize+events.TensorMax]
	head(raw, t)
	nb := uint64(4 / (1 + t.typ)) // f32 or f16; the quantised types are only sources here
	for i, n := range t.ne {
		le.PutUint64(raw[l.Nb+8*i:], nb)
		nb *= uint64(n)
	}
	le.PutUint32(raw[l.Op:], t.op)
	for i, s := range t.src {
		le.PutUint64(raw[l.Src+8*i:], s)
	}
	le.PutUint64(raw[l.ViewSrc:], t.view)
	copy(raw[l.Name:], t.name)
	for i, s := range srcs {
		off := events.HeaderSize + events.TensorMax + i*events.SrcHead
		head(b[off:off+events.SrcHead], s)
	}
	viewsAt := events.DetailSize - 8*events.MaxCounters - 8*events.NumSrc
	for i, v := range views {
		le.PutUint64(b[viewsAt+8*i:], v)
	}
	return b
}

func decode(t *testing.T, b []byte) *events.Event {
	t.Helper()
	var ev events.Event
	if err := events.Parse(b, &ev); err != nil {
		t.Fatal(err)
	}
	return &ev
}

// A matmul's detail, in both known layouts: named, typed and shaped, its reads resolved
// to the tensors owning their data, and costed; the same detail again costs a lookup.
func TestNodeDetail(t *testing.T) {
	for _, l := range ggml.Layouts {
		t.Run(l.Versions, func(t *testing.T) {
			d := New(target(l))
			weights := tensor{typ: 2, ne: [4]int64{2048, 8192, 1, 1}}
			x := tensor{typ: 0, ne: [4]int64{2048, 1, 1, 1}}
			mm := tensor{typ: 0, ne: [4]int64{8192, 1, 1, 1}, op: 3, name: "ffn_up-0", src: []uint64{0xa0, 0xb0}}
			b := record(events.NodeDetail, 0, 0x1000, l, mm, []tensor{weights, x}, []uint64{0, 0xb8})
			info, again := d.Node(decode(t, b))
			if again || info == nil {
				t.Fatalf("got %+v, ask again %v", info, again)
			}
			if info.Op != "MUL_MAT" || info.Name != "ffn_up-0" || info.Type != "f32" || info.Shape != mm.ne ||
				len(info.Srcs) != 2 || info.Srcs[0].Type != "q4_0" || info.Srcs[1].Shape != x.ne {
				t.Errorf("described %+v", info)
			}
			if len(info.Reads) != 2 || info.Reads[0] != 0xa0 || info.Reads[1] != 0xb8 {
				t.Errorf("reads %#x, want the weights and the view's owner", info.Reads)
			}
			if info.FLOPs != 2*2048*8192 || info.Bytes < 2048*8192/32*18 {
				t.Errorf("cost %.0f FLOPs, %.0f bytes", info.FLOPs, info.Bytes)
			}
			if again, _ := d.Node(decode(t, b)); again != info {
				t.Errorf("the same detail gave another description")
			}
		})
	}
}

// While a process reuses its graph, thread 0 sends a node's detail once per build: a
// later start of the same tensor is described from it. A known start never described
// asks for every detail again, once, until a detail comes.
func TestKnownNodes(t *testing.T) {
	l := ggml.Layouts[0]
	d := New(target(l))
	add := tensor{typ: 0, ne: [4]int64{16, 1, 1, 1}, op: 1, name: "add"}
	info, _ := d.Node(decode(t, record(events.NodeDetail, 0, 0x10, l, add, nil, nil)))
	if got, again := d.Node(decode(t, record(events.Node, events.FlagKnown, 0x10, l, tensor{}, nil, nil))); got != info || again {
		t.Errorf("known node: %+v, ask again %v; want the detail sent before", got, again)
	}
	if got, _ := d.Node(decode(t, record(events.Node, events.FlagKnown|events.FlagFused, 0x10, l, tensor{}, nil, nil))); got != nil {
		t.Errorf("a fused start of the tensor took the plain start's description: %+v", got)
	}
	if got, again := d.Node(decode(t, record(events.Node, events.FlagKnown, 0x20, l, tensor{}, nil, nil))); got != nil || again {
		t.Errorf("unknown node after a fused one asked: %+v, ask again %v; the fused one asked already", got, again)
	}
	d.Node(decode(t, record(events.NodeDetail, 0, 0x20, l, add, nil, nil)))
	if _, again := d.Node(decode(t, record(events.Node, events.FlagKnown, 0x30, l, tensor{}, nil, nil))); !again {
		t.Errorf("an unknown node after a detail came did not ask again")
	}
}

func TestFusedAndCopy(t *testing.T) {
	l := ggml.Layouts[1]
	d := New(target(l))
	norm := tensor{typ: 0, ne: [4]int64{2048, 1, 1, 1}, op: 2, name: "norm-0"}
	info, _ := d.Node(decode(t, record(events.NodeDetail, events.FlagFused, 0x10, l, norm, nil, nil)))
	if info.FusedOp != "MUL" || info.Op != "MUL" {
		t.Errorf("fused start described %+v", info)
	}
	b := record(events.NodeDetail, 0, 0, l, tensor{typ: 1, ne: [4]int64{4096, 2, 1, 1}, name: "inp_embd"}, nil, nil)
	binary.LittleEndian.PutUint16(b[16:], uint16(events.Copy))
	if name, bytes := d.Copy(decode(t, b)); name != "inp_embd" || bytes != 4096*2*2 {
		t.Errorf("copy of %q, %d bytes; want inp_embd, %d", name, bytes, 4096*2*2)
	}
}
