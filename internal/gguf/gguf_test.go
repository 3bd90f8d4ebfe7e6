package gguf

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := &File{
		KV: []KV{
			{"general.architecture", "llama"},
			{"u8", uint8(7)}, {"i8", int8(-7)}, {"u16", uint16(700)}, {"i16", int16(-700)},
			{"u32", uint32(70000)}, {"i32", int32(-70000)}, {"f32", float32(1.5)}, {"b", true},
			{"u64", uint64(1 << 40)}, {"i64", int64(-1 << 40)}, {"f64", 2.25},
			{"tokens", Array{Elem: TypeString, Values: []string{"<unk>", "▁a"}}},
			{"scores", Array{Elem: TypeFloat32, Values: []float32{0, -1}}},
			{"types", Array{Elem: TypeInt32, Values: []int32{2, 1}}},
		},
		Tensors: []TensorInfo{
			{Name: "a", Type: F32, Shape: []uint64{3}},
			{Name: "b", Type: F16, Shape: []uint64{5, 2}},
			{Name: "c", Type: Q8_0, Shape: []uint64{32, 1}},
		},
	}
	var buf bytes.Buffer
	err := Write(&buf, in, func(i int, w io.Writer) error {
		n, _ := in.Tensors[i].Type.Bytes(in.Tensors[i].Elements())
		_, err := w.Write(bytes.Repeat([]byte{byte(i + 1)}, int(n)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.KV, in.KV) {
		t.Errorf("KV:\n got %#v\nwant %#v", out.KV, in.KV)
	}
	if !reflect.DeepEqual(out.Tensors, in.Tensors) {
		t.Errorf("tensors:\n got %#v\nwant %#v", out.Tensors, in.Tensors)
	}
	if out.DataOffset != in.DataOffset || out.DataOffset%DefaultAlignment != 0 {
		t.Fatalf("data offset %d, writer said %d", out.DataOffset, in.DataOffset)
	}
	// Skipping arrays reads every other key, the tensors and the data offset the same.
	skipped, err := ReadSkippingArrays(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range skipped.KV {
		want := in.KV[i]
		if a, ok := want.Value.(Array); ok {
			want.Value = Array{Elem: a.Elem}
		}
		if !reflect.DeepEqual(kv, want) {
			t.Errorf("skipping arrays, key %d: got %#v, want %#v", i, kv, want)
		}
	}
	if !reflect.DeepEqual(skipped.Tensors, in.Tensors) || skipped.DataOffset != in.DataOffset {
		t.Errorf("skipping arrays: tensors or data offset differ")
	}
	for i, ti := range out.Tensors {
		if ti.Offset%DefaultAlignment != 0 {
			t.Errorf("tensor %s offset %d not aligned", ti.Name, ti.Offset)
		}
		if got := buf.Bytes()[out.DataOffset+ti.Offset]; got != byte(i+1) {
			t.Errorf("tensor %s data starts with %d, want %d", ti.Name, got, i+1)
		}
	}
}

func TestWriteRejectsShortData(t *testing.T) {
	f := &File{Tensors: []TensorInfo{{Name: "a", Type: F32, Shape: []uint64{4}}}}
	err := Write(io.Discard, f, func(int, io.Writer) error { return nil })
	if err == nil || err.Error() != "tensor a: wrote 0 bytes, want 16" {
		t.Fatalf("got %v", err)
	}
}

func TestWriteRejectsMismatchedArray(t *testing.T) {
	f := &File{KV: []KV{{"k", Array{Elem: TypeInt32, Values: []string{"x"}}}}}
	err := Write(io.Discard, f, nil)
	if err == nil || err.Error() != "key k: array of []string does not match element type 5" {
		t.Fatalf("got %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"magic":   {[]byte("GGML\x03\x00\x00\x00"), ErrNotGGUF.Error()},
		"short":   {[]byte("GG"), "gguf: reading magic: unexpected EOF"},
		"version": {[]byte("GGUF\x09\x00\x00\x00"), "gguf: unsupported version 9"},
		"counts": {append([]byte("GGUF\x03\x00\x00\x00"), bytes.Repeat([]byte{0xff}, 16)...),
			"gguf: implausible counts: 18446744073709551615 tensors, 18446744073709551615 keys"},
		"truncated": {[]byte("GGUF\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05"),
			"gguf: unexpected EOF"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, read := range []func(io.Reader) (*File, error){Read, ReadSkippingArrays} {
				if _, err := read(bytes.NewReader(tc.in)); err == nil || err.Error() != tc.want {
					t.Fatalf("got %v, want %q", err, tc.want)
				}
			}
		})
	}
	if _, err := Read(bytes.NewReader([]byte("GGML"))); !errors.Is(err, ErrNotGGUF) {
		t.Fatalf("want ErrNotGGUF, got %v", err)
	}
}

// FuzzRead checks that no input makes Read panic or allocate without bound.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	in := &File{KV: []KV{{"k", "v"}, {"a", Array{Elem: TypeInt32, Values: []int32{1}}}},
		Tensors: []TensorInfo{{Name: "t", Type: F32, Shape: []uint64{1}}}}
	if err := Write(&buf, in, func(_ int, w io.Writer) error { _, err := w.Write(make([]byte, 4)); return err }); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Read(bytes.NewReader(b))
		_, _ = ReadSkippingArrays(bytes.NewReader(b))
	})
}
