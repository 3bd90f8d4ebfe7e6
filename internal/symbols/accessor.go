package symbols

import (
	"bytes"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// maxAccessorInsns bounds the decoding of tiny accessor functions.
const maxAccessorInsns = 8

// RIPTarget returns the absolute virtual address of the first RIP-relative
// memory operand in sym's first instructions, e.g. the table that
// `lea GGML_OP_NAME(%rip),%rax` in ggml_op_name indexes.
func (f *File) RIPTarget(sym Symbol) (uint64, error) {
	code, err := f.code(sym, maxAccessorInsns*maxInsnLen)
	if err != nil {
		return 0, err
	}
	off := 0
	for range maxAccessorInsns {
		if off >= len(code) {
			break
		}
		inst, err := decode(code[off:])
		if err != nil {
			return 0, fmt.Errorf("symbols: %s: %s+%#x: %w", f.name, sym.Name, off, err)
		}
		off += inst.Len
		for _, a := range inst.Args {
			if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.RIP {
				// The displacement counts from the next instruction; x86asm
				// zero-extends it, the CPU sign-extends it.
				return sym.Value + uint64(off) + uint64(int64(int32(m.Disp))), nil
			}
		}
	}
	return 0, fmt.Errorf("symbols: %s: %s: no RIP-relative operand", f.name, sym.Name)
}

// ImmediateReturn returns imm if sym is `mov $imm,%eax; ret` (or the %rax
// form), possibly after endbr64: how ggml reports compile-time constants
// such as ggml_tensor_overhead.
func (f *File) ImmediateReturn(sym Symbol) (uint64, error) {
	return f.movRet(sym, "mov $imm,%eax", func(mov x86asm.Inst) (uint64, bool) {
		imm, ok := mov.Args[1].(x86asm.Imm)
		switch {
		case !ok:
			return 0, false
		case mov.Args[0] == x86asm.EAX: // x86asm sign-extends imm32; a 32-bit write zero-extends
			return uint64(uint32(imm)), true
		case mov.Args[0] == x86asm.RAX:
			return uint64(imm), true
		}
		return 0, false
	})
}

// FieldReturn returns off if sym is `mov off(%rdi),%eax; ret`, possibly after endbr64: a
// getter of a 32-bit field of the object its first argument points to, such as
// llama_context::n_ctx, which tells where the field is in this build.
func (f *File) FieldReturn(sym Symbol) (uint64, error) {
	return f.movRet(sym, "mov off(%rdi),%eax", func(mov x86asm.Inst) (uint64, bool) {
		m, ok := mov.Args[1].(x86asm.Mem)
		if !ok || mov.Args[0] != x86asm.EAX || m.Base != x86asm.RDI || m.Index != 0 || m.Segment != 0 || m.Disp < 0 {
			return 0, false
		}
		return uint64(m.Disp), true
	})
}

// movRet returns what match makes of sym's first instruction if sym is a mov that match
// accepts and then ret, possibly after endbr64; shape names the mov in the error.
func (f *File) movRet(sym Symbol, shape string, match func(mov x86asm.Inst) (uint64, bool)) (uint64, error) {
	code, err := f.code(sym, len(endbr64)+2*maxInsnLen)
	if err != nil {
		return 0, err
	}
	code = bytes.TrimPrefix(code, endbr64)
	if mov, err := decode(code); err == nil && mov.Op == x86asm.MOV {
		if v, ok := match(mov); ok {
			if ret, err := decode(code[mov.Len:]); err == nil && ret.Op == x86asm.RET && ret.Args[0] == nil {
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("symbols: %s: %s is not `%s; ret`", f.name, sym.Name, shape)
}
