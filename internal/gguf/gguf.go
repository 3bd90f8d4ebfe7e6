// Package gguf reads and writes GGUF files, the model format of llama.cpp and GGML.
//
// The writer streams: metadata and tensor descriptions are written first, then each
// tensor's data is produced on demand, so multi-gigabyte models never sit in memory.
package gguf

import (
	"fmt"
)

// Magic opens every GGUF file.
const Magic = "GGUF"

// Version is the GGUF version this package writes.
const Version = 3

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, as numbered by the GGUF specification.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

// TensorType is a ggml_type. Only the types this project writes or reads sizes for are named.
type TensorType uint32

// Tensor types, as numbered by ggml.
const (
	F32  TensorType = 0
	F16  TensorType = 1
	Q4_0 TensorType = 2
	Q8_0 TensorType = 8
	Q4_K TensorType = 12
	Q5_K TensorType = 13
	Q6_K TensorType = 14 // llama-quantize's type for output.weight in a Q4_0 model
)

// blockSize and blockBytes give the storage of a type: blockBytes per blockSize elements.
var typeStorage = map[TensorType]struct{ blockSize, blockBytes uint64 }{
	F32:  {1, 4},
	F16:  {1, 2},
	Q4_0: {32, 18},
	Q8_0: {32, 34},
	Q4_K: {256, 144},
	Q5_K: {256, 176},
	Q6_K: {256, 210},
}

// Bytes returns the storage size of n elements of type t.
func (t TensorType) Bytes(n uint64) (uint64, error) {
	s, ok := typeStorage[t]
	if !ok {
		return 0, fmt.Errorf("gguf: no storage size known for tensor type %d", t)
	}
	if n%s.blockSize != 0 {
		return 0, fmt.Errorf("gguf: %d elements is not a multiple of the block size %d of type %d", n, s.blockSize, t)
	}
	return n / s.blockSize * s.blockBytes, nil
}

// KV is one metadata entry. Value holds a Go value of the matching type: uint8 … float64,
// bool, string, or Array.
type KV struct {
	Key   string
	Value any
}

// Array is a typed metadata array. Values is a slice of the element's Go type.
type Array struct {
	Elem   ValueType
	Values any
}

// TensorInfo describes one tensor. Shape lists ne[0] first, as ggml does.
type TensorInfo struct {
	Name   string
	Type   TensorType
	Shape  []uint64
	Offset uint64 // relative to the start of the data section
}

// Elements is the product of the shape.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is the header of a GGUF file: everything but the tensor data.
type File struct {
	Version    uint32
	KV         []KV
	Tensors    []TensorInfo
	DataOffset uint64 // absolute offset of the data section, set by Read
}

// Lookup returns the value of key, if present.
func (f *File) Lookup(key string) (any, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Alignment is general.alignment, or the default.
func (f *File) Alignment() uint64 {
	if v, ok := f.Lookup("general.alignment"); ok {
		if a, ok := v.(uint32); ok && a > 0 {
			return uint64(a)
		}
	}
	return DefaultAlignment
}

func align(n, a uint64) uint64 { return (n + a - 1) / a * a }
