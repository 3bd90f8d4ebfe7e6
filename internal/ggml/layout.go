// Package ggml knows the inside of a GGML runtime: the layout of struct ggml_tensor and its
// neighbours per ggml version, and the names of ops and types, read from the target itself
// so that profinfer never carries a numbering that a new ggml release could change.
package ggml

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// Layout gives the byte offsets profinfer reads, for one family of ggml versions.
type Layout struct {
	Versions   string // the ggml versions this layout was verified on, for messages
	TensorSize int    // sizeof(struct ggml_tensor)
	Type       int
	Ne         int
	Nb         int
	Op         int
	OpParams   int
	Flags      int
	Src        int
	MaxSrc     int
	ViewSrc    int
	Data       int
	Name       int
	MaxName    int
	Buffer     int // the ggml_backend_buffer that holds the data

	BufferGetBase  int // struct ggml_backend_buffer.iface.get_base
	BackendGetName int // struct ggml_backend.iface.get_name
	GraphNNodes    int // struct ggml_cgraph.n_nodes
	GraphNodes     int // struct ggml_cgraph.nodes
	CplanNThreads  int // struct ggml_cplan.n_threads
	TypeTraitsSize int // sizeof(struct ggml_type_traits), the stride of type_traits[]
	TypeBlockSize  int // ggml_type_traits.blck_size
	TypeSize       int // ggml_type_traits.type_size
}

// TypeI32 is GGML_TYPE_I32, the type of MoE expert ids; its number has not changed since
// ggml had it.
const TypeI32 = 26

// objectSize is sizeof(struct ggml_object), which ggml_tensor_overhead() adds to the tensor.
const objectSize = 32

// Layouts are the known struct layouts. A target's is the one whose tensor size matches
// what its ggml_tensor_overhead() returns and whose offsets its own field getters confirm
// (see verify): both have a 336-byte tensor.
var Layouts = []Layout{{
	Versions:   "b4234 (Dec 2024) to 0.25",
	TensorSize: 336, Type: 0, Ne: 16, Nb: 48, Op: 80, OpParams: 84, Flags: 148,
	Src: 152, MaxSrc: 10, ViewSrc: 232, Data: 248, Name: 256, MaxName: 64, Buffer: 8,
	BufferGetBase: 8, BackendGetName: 8,
	GraphNNodes: 4, GraphNodes: 16, CplanNThreads: 16, TypeTraitsSize: 56, TypeBlockSize: 8, TypeSize: 24,
}, {
	// Before ggml_tensor.grad was removed and the CPU half of the type traits moved to the
	// CPU backend (both Nov 2024); the buffer interface still began with get_name.
	Versions:   "b3889 (Oct 2024), with ggml_tensor.grad",
	TensorSize: 336, Type: 0, Ne: 16, Nb: 48, Op: 80, OpParams: 84, Flags: 148,
	Src: 160, MaxSrc: 10, ViewSrc: 240, Data: 256, Name: 264, MaxName: 64, Buffer: 8,
	BufferGetBase: 16, BackendGetName: 8,
	GraphNNodes: 4, GraphNodes: 16, CplanNThreads: 16, TypeTraitsSize: 120, TypeBlockSize: 8, TypeSize: 24,
}}

// layoutsFor returns the known layouts whose tensor is the size ggml_tensor_overhead()
// gives. A build may set GGML_MAX_NAME, the name's size and the struct's last field but
// two (a pointer and 8 bytes of padding): @fugood/llama.node builds with 80. Each known
// layout is therefore also matched with its name grown or shrunk to fill the size, in
// whole pointers, as the name's successor aligns it; verify then checks the offsets.
func layoutsFor(overhead uint64, version string) ([]Layout, error) {
	var ls []Layout
	sizes := map[int]bool{}
	for _, l := range Layouts {
		sizes[l.TensorSize+objectSize] = true
		grow := int(overhead) - objectSize - l.TensorSize
		if grow%8 != 0 || l.MaxName+grow < 8 || grow > maxNameGrowth {
			continue
		}
		l.TensorSize += grow
		l.MaxName += grow
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("ggml: unknown struct layout in ggml %s: ggml_tensor_overhead() is %d bytes; profinfer knows %v, with GGML_MAX_NAME 64, or another",
			cmp.Or(version, "(no version)"), overhead, slices.Sorted(maps.Keys(sizes)))
	}
	return ls, nil
}

// maxNameGrowth bounds the name's growth past GGML_MAX_NAME 64 that a layout is matched
// with: the programs copy TensorMax bytes of a tensor, and refuse larger ones.
const maxNameGrowth = 48

// Tensor is what profinfer reads of one struct ggml_tensor.
type Tensor struct {
	Type    uint32
	Ne      [4]int64
	Nb      [4]uint64 // strides in bytes
	Op      uint32
	OpParam int32 // op_params[0]: the unary or GLU op for UNARY and GLU nodes
	Flags   int32
	Src     [10]uint64
	ViewSrc uint64
	Name    []byte // aliases the raw record
}

// Tensor decodes a raw copy of a struct ggml_tensor.
func (l *Layout) Tensor(raw []byte, t *Tensor) {
	le := binary.LittleEndian
	t.Type = le.Uint32(raw[l.Type:])
	for i := range t.Ne {
		t.Ne[i] = int64(le.Uint64(raw[l.Ne+8*i:]))
		t.Nb[i] = le.Uint64(raw[l.Nb+8*i:])
	}
	t.Op = le.Uint32(raw[l.Op:])
	t.OpParam = int32(le.Uint32(raw[l.OpParams:]))
	t.Flags = int32(le.Uint32(raw[l.Flags:]))
	for i := 0; i < l.MaxSrc && i < len(t.Src); i++ {
		t.Src[i] = le.Uint64(raw[l.Src+8*i:])
	}
	t.ViewSrc = le.Uint64(raw[l.ViewSrc:])
	name := raw[l.Name : l.Name+l.MaxName]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	t.Name = name
}

// SrcHead decodes the type and shape from the head of a source tensor.
func (l *Layout) SrcHead(raw []byte) (typ uint32, ne [4]int64) {
	le := binary.LittleEndian
	typ = le.Uint32(raw[l.Type:])
	for i := range ne {
		ne[i] = int64(le.Uint64(raw[l.Ne+8*i:]))
	}
	return typ, ne
}
