package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Limits that keep a corrupt or hostile header from making Read allocate without bound.
const (
	maxStringLen = 1 << 20
	maxArrayLen  = 1 << 24
	maxCount     = 1 << 20
	maxDims      = 8
)

// ErrNotGGUF is returned when the input does not start with the GGUF magic.
var ErrNotGGUF = errors.New("gguf: not a GGUF file (bad magic)")

// Read parses the header, metadata and tensor infos from r. Arrays of string, float32,
// int32 and uint32 come back as typed slices; other element types as []any.
func Read(r io.Reader) (*File, error) { return read(r, false) }

// ReadSkippingArrays is Read, but leaves every array's values unread (Values nil): a
// tokenizer's vocabulary is most of a header, and describing a model needs none of it.
func ReadSkippingArrays(r io.Reader) (*File, error) { return read(r, true) }

func read(r io.Reader, skipArrays bool) (*File, error) {
	d := decoder{r: bufio.NewReaderSize(r, 1<<16), skipArrays: skipArrays}
	var magic [4]byte
	d.full(magic[:])
	if d.err != nil {
		return nil, fmt.Errorf("gguf: reading magic: %w", d.err)
	}
	if string(magic[:]) != Magic {
		return nil, ErrNotGGUF
	}
	f := &File{Version: d.u32()}
	if d.err == nil && (f.Version < 2 || f.Version > 3) {
		return nil, fmt.Errorf("gguf: unsupported version %d", f.Version)
	}
	nt, nkv := d.u64(), d.u64()
	if d.err == nil && (nt > maxCount || nkv > maxCount) {
		return nil, fmt.Errorf("gguf: implausible counts: %d tensors, %d keys", nt, nkv)
	}
	for i := uint64(0); i < nkv && d.err == nil; i++ {
		k := d.str()
		v := d.value(ValueType(d.u32()))
		f.KV = append(f.KV, KV{Key: k, Value: v})
	}
	for i := uint64(0); i < nt && d.err == nil; i++ {
		t := TensorInfo{Name: d.str()}
		nd := d.u32()
		if nd > maxDims {
			return nil, fmt.Errorf("gguf: tensor %q has %d dimensions", t.Name, nd)
		}
		for j := uint32(0); j < nd && d.err == nil; j++ {
			t.Shape = append(t.Shape, d.u64())
		}
		t.Type = TensorType(d.u32())
		t.Offset = d.u64()
		f.Tensors = append(f.Tensors, t)
	}
	if d.err != nil {
		return nil, fmt.Errorf("gguf: %w", d.err)
	}
	f.DataOffset = align(d.n, f.Alignment())
	return f, nil
}

type decoder struct {
	r          *bufio.Reader
	n          uint64
	err        error
	buf        [8]byte
	skipArrays bool
}

func (d *decoder) full(p []byte) {
	if d.err != nil {
		return
	}
	n, err := io.ReadFull(d.r, p)
	d.n += uint64(n)
	if err != nil {
		d.err = err
	}
}

func (d *decoder) u8() uint8 { d.full(d.buf[:1]); return d.buf[0] }
func (d *decoder) u16() uint16 {
	d.full(d.buf[:2])
	return binary.LittleEndian.Uint16(d.buf[:2])
}
func (d *decoder) u32() uint32 {
	d.full(d.buf[:4])
	return binary.LittleEndian.Uint32(d.buf[:4])
}
func (d *decoder) u64() uint64 {
	d.full(d.buf[:8])
	return binary.LittleEndian.Uint64(d.buf[:8])
}

func (d *decoder) str() string {
	n := d.u64()
	if d.err != nil {
		return ""
	}
	if n > maxStringLen {
		d.err = fmt.Errorf("string of %d bytes is implausible", n)
		return ""
	}
	b := make([]byte, n)
	d.full(b)
	return string(b)
}

func (d *decoder) value(t ValueType) any {
	switch t {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		return int8(d.u8())
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		return int16(d.u16())
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		return int32(d.u32())
	case TypeFloat32:
		return math.Float32frombits(d.u32())
	case TypeBool:
		return d.u8() != 0
	case TypeString:
		return d.str()
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	case TypeArray:
		return d.array()
	}
	if d.err == nil {
		d.err = fmt.Errorf("unknown metadata value type %d", t)
	}
	return nil
}

func (d *decoder) array() any {
	elem := ValueType(d.u32())
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > maxArrayLen || elem == TypeArray {
		d.err = fmt.Errorf("array of %d elements of type %d is not supported", n, elem)
		return nil
	}
	a := Array{Elem: elem}
	if d.skipArrays {
		d.skip(elem, n)
		return a
	}
	switch elem {
	case TypeString:
		vs := make([]string, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			vs = append(vs, d.str())
		}
		a.Values = vs
	case TypeFloat32:
		vs := make([]float32, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			vs = append(vs, math.Float32frombits(d.u32()))
		}
		a.Values = vs
	case TypeInt32:
		vs := make([]int32, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			vs = append(vs, int32(d.u32()))
		}
		a.Values = vs
	case TypeUint32:
		vs := make([]uint32, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			vs = append(vs, d.u32())
		}
		a.Values = vs
	default:
		vs := make([]any, 0, min(n, 1024))
		for i := uint64(0); i < n && d.err == nil; i++ {
			vs = append(vs, d.value(elem))
		}
		a.Values = vs
	}
	return a
}

// skip reads past n array elements of type elem.
func (d *decoder) skip(elem ValueType, n uint64) {
	var size uint64
	switch elem {
	case TypeUint8, TypeInt8, TypeBool:
		size = 1
	case TypeUint16, TypeInt16:
		size = 2
	case TypeUint32, TypeInt32, TypeFloat32:
		size = 4
	case TypeUint64, TypeInt64, TypeFloat64:
		size = 8
	}
	switch {
	case elem == TypeString:
		for i := uint64(0); i < n && d.err == nil; i++ {
			if l := d.u64(); l > maxStringLen {
				d.err = fmt.Errorf("string of %d bytes is implausible", l)
			} else {
				d.discard(l)
			}
		}
	case size > 0:
		d.discard(n * size)
	case d.err == nil:
		d.err = fmt.Errorf("unknown metadata value type %d", elem)
	}
}

func (d *decoder) discard(n uint64) {
	if d.err != nil {
		return
	}
	got, err := d.r.Discard(int(n))
	d.n += uint64(got)
	if err != nil {
		d.err = err
	}
}
