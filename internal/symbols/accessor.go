package symbols

import "fmt"

// maxAccessorInsns bounds the decoding of tiny accessor functions.
const maxAccessorInsns = 8

// getterKind is the shape of a function that returns at once what one instruction (or
// arm64's adrp and add) computes from its first argument, a constant or its own address.
type getterKind int

const (
	retImm       getterKind = iota + 1 // a constant
	retField32                         // a 32-bit field of the object its first argument points to
	retFieldAddr                       // the address of a field of its first argument
	retField64                         // a 64-bit field of its first argument
	retPCRel                           // an address relative to its own code
)

// PCRelTarget returns the absolute virtual address of the first PC-relative address
// that sym's first instructions form, e.g. the table that `lea GGML_OP_NAME(%rip),%rax`
// (x86-64) or `adrp x8, GGML_OP_NAME; add x8, x8, :lo12:GGML_OP_NAME` (arm64) in
// ggml_op_name indexes.
func (f *File) PCRelTarget(sym Symbol) (uint64, error) {
	m, err := f.isa(sym)
	if err != nil {
		return 0, err
	}
	code, err := f.code(sym, maxAccessorInsns*m.maxInsn)
	if err != nil {
		return 0, err
	}
	addr, ok, err := m.pcRel(code, sym.Value)
	if err != nil || !ok {
		return 0, fmt.Errorf("symbols: %s: %s: no PC-relative address (%v)", f.name, sym.Name, err)
	}
	return addr, nil
}

// ImmediateReturn returns imm if sym returns a constant at once: how ggml reports
// compile-time constants such as ggml_tensor_overhead.
func (f *File) ImmediateReturn(sym Symbol) (uint64, error) { return f.getter(sym, retImm) }

// FieldReturn returns off if sym returns a 32-bit field of the object its first argument
// points to, such as llama_context::n_ctx, which tells where the field is in this build.
func (f *File) FieldReturn(sym Symbol) (uint64, error) { return f.getter(sym, retField32) }

// AddressReturn returns off if sym returns the address of a field of its first argument,
// such as ggml_get_name.
func (f *File) AddressReturn(sym Symbol) (uint64, error) { return f.getter(sym, retFieldAddr) }

// PointerReturn returns off if sym returns a 64-bit field of its first argument, such
// as ggml_get_data.
func (f *File) PointerReturn(sym Symbol) (uint64, error) { return f.getter(sym, retField64) }

// StringReturn returns the string sym returns if sym returns a constant string at once,
// such as the CPU backend's get_name. Name only sym's address when its file has no
// symbol for it.
func (f *File) StringReturn(sym Symbol) (string, error) {
	addr, err := f.getter(sym, retPCRel)
	if err != nil {
		return "", err
	}
	return f.CString(addr)
}

// getter returns what sym returns if it is a getter of kind want (possibly after a
// landing pad: endbr64, bti c).
func (f *File) getter(sym Symbol, want getterKind) (uint64, error) {
	m, err := f.isa(sym)
	if err != nil {
		return 0, err
	}
	code, err := f.code(sym, m.getterBytes)
	if err != nil {
		return 0, err
	}
	kind, v := m.getter(code, sym.Value)
	if kind != want {
		return 0, fmt.Errorf("symbols: %s: %s is not `%s; ret`", f.name, sym.Name, m.shapes[want])
	}
	return v, nil
}
