package ggml

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/symbols"
)

// Names are the op, type, unary-op and GLU-op names of one target, indexed by enum value.
type Names struct {
	Ops, Types, Unary, GLU []string
}

// Op returns the name of op n as ggml_op_name() prints it, with UNARY and GLU nodes
// refined by their sub-op (e.g. "UNARY(SILU)" is reported as "SILU"), as ggml_op_desc() does.
func (n *Names) Op(op uint32, param int32) string {
	name := lookup(n.Ops, uint32(op), "OP")
	switch name {
	case "UNARY":
		if param >= 0 && int(param) < len(n.Unary) {
			return n.Unary[param]
		}
	case "GLU":
		if param >= 0 && int(param) < len(n.GLU) {
			return n.GLU[param]
		}
	}
	return name
}

// Type returns the name of ggml_type t as ggml_type_name() prints it.
func (n *Names) Type(t uint32) string { return lookup(n.Types, t, "TYPE") }

// NBytes is the size of a tensor's data as ggml_nbytes computes it, or 0 when its type's
// size is unknown.
func (t *Target) NBytes(x *Tensor) int64 {
	size := t.Size(x.Type)
	if size.Block == 0 {
		return 0
	}
	for _, n := range x.Ne {
		if n <= 0 {
			return 0
		}
	}
	n, first := size.Bytes, 0
	if size.Block > 1 { // quantised rows are whole blocks
		n, first = x.Ne[0]*int64(x.Nb[0])/size.Block, 1
	}
	for i := first; i < len(x.Ne); i++ {
		n += (x.Ne[i] - 1) * int64(x.Nb[i])
	}
	return n
}

func lookup(names []string, i uint32, what string) string {
	if int(i) < len(names) && names[i] != "" {
		return names[i]
	}
	return fmt.Sprintf("%s_%d", what, i)
}

// TypeSize is how a ggml type is stored: Bytes per block of Block elements.
type TypeSize struct{ Block, Bytes int64 }

// Target is what profinfer needs to know about one loaded libggml-base (or a static
// executable that contains it).
type Target struct {
	Version string
	Layout  Layout
	Names   Names
	Sizes   []TypeSize // by type enum, from the target's type_traits; zero where unknown
}

// Size returns the storage of type t, or zero when it is unknown.
func (t *Target) Size(typ uint32) TypeSize {
	if int(typ) < len(t.Sizes) {
		return t.Sizes[typ]
	}
	return TypeSize{}
}

// Symbols profinfer needs in libggml-base.
var baseSymbols = []string{"ggml_tensor_overhead", "ggml_op_name", "ggml_type_name"}

// ErrNotRelocated says that the tables Inspect reads from the process's memory are not
// relocated yet: the loader has mapped the object and not yet run its relocations, and
// the tables' pointers are zero until it does. A look a moment later finds them.
var ErrNotRelocated = errors.New("the dynamic loader has not relocated it yet")

// Inspect reads the version, struct layout and names of the ggml in f, loaded in a
// process at bias (the difference between run-time and link-time addresses), whose
// memory mem is. Tables of pointers are read from the live process, already relocated.
func Inspect(f *symbols.File, mem io.ReaderAt, bias uint64) (*Target, error) {
	version, layout, err := layoutOf(f)
	if err != nil {
		return nil, err
	}
	t := &Target{Version: version, Layout: layout}
	r := memReader{mem: mem, bias: bias}
	if t.Names.Ops, err = r.table(f, "GGML_OP_NAME", "ggml_op_name", 8); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(t.Names.Ops, func(s string) bool { return s != "" }) {
		return nil, fmt.Errorf("ggml: %s: GGML_OP_NAME holds no name: %w", f.Path(), ErrNotRelocated)
	}
	if t.Names.Types, err = r.table(f, "type_traits", "ggml_type_name", uint64(layout.TypeTraitsSize)); err != nil {
		return nil, err
	}
	// The first types have kept their names since ggml began: a table read with another
	// stride than the target's would not start with them.
	if len(t.Names.Types) < 2 || t.Names.Types[0] != "f32" || t.Names.Types[1] != "f16" {
		return nil, fmt.Errorf("ggml: %s: type_traits does not have the layout of ggml %s: its entries are not %d bytes apart",
			f.Path(), layout.Versions, layout.TypeTraitsSize)
	}
	t.Sizes = r.typeSizes(f, len(t.Names.Types), layout)
	// Sub-op names refine UNARY and GLU nodes; older ggml versions lack GLU.
	t.Names.Unary, _ = r.table(f, "GGML_UNARY_OP_NAME", "ggml_unary_op_name", 8)
	t.Names.GLU, _ = r.table(f, "GGML_GLU_OP_NAME", "ggml_glu_op_name", 8)
	return t, nil
}

// layoutOf reads the ggml version of f and finds its struct layout, from its code alone.
func layoutOf(f *symbols.File) (string, Layout, error) {
	if missing := f.Missing(baseSymbols...); len(missing) > 0 {
		return "", Layout{}, fmt.Errorf("ggml: %s lacks %s: not a GGML runtime, or stripped", f.Path(), strings.Join(missing, ", "))
	}
	// ggml_version came in mid-2025; without it the layout stands on the code alone. A
	// build may have it return NULL: Ollama's cgo build before 0.30 defines GGML_VERSION 0.
	var version string
	if sym, ok := f.Symbol("ggml_version"); ok {
		v, err := readVersion(f)
		if err != nil {
			if null, nerr := f.ImmediateReturn(sym); nerr != nil || null != 0 {
				return "", Layout{}, err
			}
		}
		version = v
	}
	sym, _ := f.Symbol("ggml_tensor_overhead")
	overhead, err := f.ImmediateReturn(sym)
	if err != nil {
		return "", Layout{}, fmt.Errorf("ggml: reading ggml_tensor_overhead in %s: %w", f.Path(), err)
	}
	layouts, err := layoutsFor(overhead, version)
	if err != nil {
		return "", Layout{}, err
	}
	var layout Layout
	var errs []error
	for _, l := range layouts {
		if err := verify(f, l); err != nil {
			errs = append(errs, err)
			continue
		}
		layout = l
		break
	}
	if layout.TensorSize == 0 {
		return "", Layout{}, errors.Join(errs...)
	}
	return version, layout, nil
}

// verify checks the layout against the code of the target's own field getters: the size
// of a tensor alone could match a reordered struct. ggml_get_name is in every release and
// must agree; ggml_get_data must agree where it decodes.
func verify(f *symbols.File, l Layout) error {
	checks := []struct {
		getter string
		read   func(symbols.Symbol) (uint64, error)
		want   int
		needed bool
	}{
		{"ggml_get_name", f.AddressReturn, l.Name, true},
		{"ggml_get_data", f.PointerReturn, l.Data, false},
	}
	for _, c := range checks {
		sym, ok := f.Symbol(c.getter)
		var got uint64
		var err error
		if ok {
			got, err = c.read(sym)
		}
		switch {
		case (!ok || err != nil) && c.needed:
			return fmt.Errorf("ggml: %s: cannot establish the tensor layout: %s does not decode as a field getter (%v)", f.Path(), c.getter, err)
		case !ok || err != nil:
		case got != uint64(c.want):
			return fmt.Errorf("ggml: %s: unknown tensor layout: %s reads offset %d, the layout of ggml %s has %d", f.Path(), c.getter, got, l.Versions, c.want)
		}
	}
	return nil
}

func readVersion(f *symbols.File) (string, error) {
	sym, _ := f.Symbol("ggml_version")
	addr, err := f.PCRelTarget(sym)
	if err != nil {
		return "", fmt.Errorf("ggml: finding the version string in %s: %w", f.Path(), err)
	}
	v, err := f.CString(addr)
	if err != nil || v == "" {
		return "", fmt.Errorf("ggml: reading the version string in %s: %v", f.Path(), err)
	}
	return v, nil
}

// memReader reads a target's memory at link-time addresses.
type memReader struct {
	mem  io.ReaderAt
	bias uint64
}

// table reads a table of string pointers with the given stride (the string pointer leads
// each entry). Its address comes from the table's own symbol where the file has one (which
// also gives its length), else from the accessor function's RIP-relative load; then
// entries are read until one is not a valid name.
func (r memReader) table(f *symbols.File, symbol, accessor string, stride uint64) ([]string, error) {
	addr, n, err := tableAddr(f, symbol, accessor, stride)
	if err != nil {
		return nil, err
	}
	var names []string
	ptr := make([]byte, 8)
	for i := uint64(0); i < n; i++ {
		if _, err := r.mem.ReadAt(ptr, int64(r.bias+addr+i*stride)); err != nil {
			if i == 0 {
				return nil, fmt.Errorf("ggml: reading %s from process memory: %w", symbol, err)
			}
			break
		}
		p := binary.LittleEndian.Uint64(ptr)
		s, err := r.cstring(p)
		if i == 0 && (err != nil || !printable(s)) && r.unrelocated(p) {
			return nil, fmt.Errorf("ggml: %s in %s: %w", symbol, f.Path(), ErrNotRelocated)
		}
		if p == 0 || err != nil || !printable(s) {
			if n == maxTableEntries { // no symbol size: the table ended
				break
			}
			s = "" // a hole in a sized table (e.g. a removed type); keep numbering
		}
		names = append(names, s)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("ggml: %s in %s is empty", symbol, f.Path())
	}
	return names, nil
}

const maxTableEntries = 1024

// unrelocated says whether a table's first pointer, which names no string, is what the
// file holds before the loader relocates it: zero, or the string's link-time address.
func (r memReader) unrelocated(p uint64) bool {
	if p == 0 {
		return true
	}
	s, err := r.cstring(p + r.bias)
	return err == nil && printable(s)
}

// tableAddr locates a table: by its own symbol where the file has one (which also gives
// its length), else by the accessor function's RIP-relative load, with no length known
// (maxTableEntries).
func tableAddr(f *symbols.File, symbol, accessor string, stride uint64) (addr, n uint64, err error) {
	if s, ok := f.Symbol(symbol); ok && s.Size > 0 {
		return s.Value, min(s.Size/stride, maxTableEntries), nil
	}
	s, ok := f.Symbol(accessor)
	if !ok {
		return 0, 0, fmt.Errorf("ggml: %s has neither %s nor %s", f.Path(), symbol, accessor)
	}
	if addr, err = f.PCRelTarget(s); err != nil {
		return 0, 0, fmt.Errorf("ggml: locating %s in %s: %w", symbol, f.Path(), err)
	}
	return addr, maxTableEntries, nil
}

// typeSizes reads blck_size and type_size of the first n entries of type_traits. They
// only feed the roofline estimate, so a failed read leaves sizes unknown, not an error.
func (r memReader) typeSizes(f *symbols.File, n int, l Layout) []TypeSize {
	addr, _, err := tableAddr(f, "type_traits", "ggml_type_name", uint64(l.TypeTraitsSize))
	if err != nil {
		return nil
	}
	sizes := make([]TypeSize, n)
	entry := make([]byte, l.TypeTraitsSize)
	for i := range sizes {
		if _, err := r.mem.ReadAt(entry, int64(r.bias+addr+uint64(i*l.TypeTraitsSize))); err != nil {
			return nil
		}
		block := int64(binary.LittleEndian.Uint64(entry[l.TypeBlockSize:]))
		bytes := int64(binary.LittleEndian.Uint64(entry[l.TypeSize:]))
		if block > 0 && block <= 1024 && bytes > 0 && bytes <= 1<<16 {
			sizes[i] = TypeSize{Block: block, Bytes: bytes}
		}
	}
	return sizes
}

func (r memReader) cstring(addr uint64) (string, error) {
	buf := make([]byte, 64)
	n, err := r.mem.ReadAt(buf, int64(addr))
	if n == 0 {
		if err == nil {
			err = errors.New("empty read")
		}
		return "", err
	}
	if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
		return string(buf[:i]), nil
	}
	return "", errors.New("unterminated string")
}

func printable(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
