package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// DataFunc writes the data of tensor i, exactly its storage size in bytes.
type DataFunc func(i int, w io.Writer) error

// Write writes f to w: header, metadata, tensor infos, then each tensor's data from data,
// aligned as the format requires. Tensor offsets in f are assigned here.
func Write(w io.Writer, f *File, data DataFunc) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countingWriter{w: bw}
	e := encoder{w: cw}

	a := f.Alignment()
	var off uint64
	sizes := make([]uint64, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		n, err := t.Type.Bytes(t.Elements())
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		off = align(off, a)
		t.Offset, sizes[i] = off, n
		off += n
	}

	e.raw([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(f.Tensors)))
	e.u64(uint64(len(f.KV)))
	for _, kv := range f.KV {
		e.str(kv.Key)
		if err := e.value(kv.Value, true); err != nil {
			return fmt.Errorf("key %s: %w", kv.Key, err)
		}
	}
	for _, t := range f.Tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	e.pad(a)
	if e.err != nil {
		return e.err
	}
	f.DataOffset = cw.n

	for i, t := range f.Tensors {
		e.pad(a)
		if e.err != nil {
			return e.err
		}
		start := cw.n
		if err := data(i, cw); err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if got := cw.n - start; got != sizes[i] {
			return fmt.Errorf("tensor %s: wrote %d bytes, want %d", t.Name, got, sizes[i])
		}
	}
	return bw.Flush()
}

type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

// encoder writes little-endian GGUF primitives and keeps the first error.
type encoder struct {
	w   *countingWriter
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.raw(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.raw(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

func (e *encoder) pad(a uint64) {
	if n := align(e.w.n, a) - e.w.n; n > 0 {
		e.raw(make([]byte, n))
	}
}

// value writes v, preceded by its type tag when tagged (array elements are untagged).
func (e *encoder) value(v any, tagged bool) error {
	tag := func(t ValueType) {
		if tagged {
			e.u32(uint32(t))
		}
	}
	switch x := v.(type) {
	case uint8:
		tag(TypeUint8)
		e.raw([]byte{x})
	case int8:
		tag(TypeInt8)
		e.raw([]byte{byte(x)})
	case uint16:
		tag(TypeUint16)
		e.raw(binary.LittleEndian.AppendUint16(nil, x))
	case int16:
		tag(TypeInt16)
		e.raw(binary.LittleEndian.AppendUint16(nil, uint16(x)))
	case uint32:
		tag(TypeUint32)
		e.u32(x)
	case int32:
		tag(TypeInt32)
		e.u32(uint32(x))
	case float32:
		tag(TypeFloat32)
		e.raw(binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
	case bool:
		tag(TypeBool)
		b := byte(0)
		if x {
			b = 1
		}
		e.raw([]byte{b})
	case string:
		tag(TypeString)
		e.str(x)
	case uint64:
		tag(TypeUint64)
		e.u64(x)
	case int64:
		tag(TypeInt64)
		e.u64(uint64(x))
	case float64:
		tag(TypeFloat64)
		e.u64(math.Float64bits(x))
	case Array:
		tag(TypeArray)
		return e.array(x)
	default:
		return fmt.Errorf("unsupported metadata value type %T", v)
	}
	return nil
}

func (e *encoder) array(a Array) error {
	elem, n := arrayElem(a.Values)
	if n < 0 || elem != a.Elem {
		return fmt.Errorf("array of %T does not match element type %d", a.Values, a.Elem)
	}
	e.u32(uint32(elem))
	e.u64(uint64(n))
	switch vs := a.Values.(type) {
	case []string:
		for _, s := range vs {
			e.str(s)
		}
	case []float32:
		for _, f := range vs {
			e.u32(math.Float32bits(f))
		}
	case []int32:
		for _, v := range vs {
			e.u32(uint32(v))
		}
	case []uint32:
		for _, v := range vs {
			e.u32(v)
		}
	}
	return nil
}

// arrayElem returns the element type and length of a supported array slice, or -1.
func arrayElem(v any) (ValueType, int) {
	switch vs := v.(type) {
	case []string:
		return TypeString, len(vs)
	case []float32:
		return TypeFloat32, len(vs)
	case []int32:
		return TypeInt32, len(vs)
	case []uint32:
		return TypeUint32, len(vs)
	}
	return 0, -1
}
