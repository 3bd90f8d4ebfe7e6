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
	code, err := f.code(sym, len(endbr64)+2*maxInsnLen)
	if err != nil {
		return 0, err
	}
	code = bytes.TrimPrefix(code, endbr64)
	if imm, ok := movRet(code); ok {
		return imm, nil
	}
	return 0, fmt.Errorf("symbols: %s: %s is not `mov $imm,%%eax; ret`", f.name, sym.Name)
}

// movRet matches `mov $imm,%eax; ret` or `mov $imm,%rax; ret`.
func movRet(code []byte) (uint64, bool) {
	mov, err := decode(code)
	if err != nil || mov.Op != x86asm.MOV {
		return 0, false
	}
	imm, ok := mov.Args[1].(x86asm.Imm)
	if !ok {
		return 0, false
	}
	ret, err := decode(code[mov.Len:])
	if err != nil || ret.Op != x86asm.RET || ret.Args[0] != nil {
		return 0, false
	}
	switch mov.Args[0] {
	case x86asm.EAX: // x86asm sign-extends imm32; a 32-bit write zero-extends
		return uint64(uint32(imm)), true
	case x86asm.RAX:
		return uint64(imm), true
	}
	return 0, false
}

// FieldReturn returns off if sym is `mov off(%rdi),%eax; ret`, possibly after endbr64: a
// getter of a 32-bit field of the object its first argument points to, such as
// llama_context::n_ctx, which tells where the field is in this build.
func (f *File) FieldReturn(sym Symbol) (uint64, error) {
	code, err := f.code(sym, len(endbr64)+2*maxInsnLen)
	if err != nil {
		return 0, err
	}
	code = bytes.TrimPrefix(code, endbr64)
	if off, ok := fieldRet(code); ok {
		return off, nil
	}
	return 0, fmt.Errorf("symbols: %s: %s is not `mov off(%%rdi),%%eax; ret`", f.name, sym.Name)
}

func fieldRet(code []byte) (uint64, bool) {
	mov, err := decode(code)
	if err != nil || mov.Op != x86asm.MOV || mov.Args[0] != x86asm.EAX {
		return 0, false
	}
	m, ok := mov.Args[1].(x86asm.Mem)
	if !ok || m.Base != x86asm.RDI || m.Index != 0 || m.Segment != 0 || m.Disp < 0 {
		return 0, false
	}
	ret, err := decode(code[mov.Len:])
	if err != nil || ret.Op != x86asm.RET || ret.Args[0] != nil {
		return 0, false
	}
	return uint64(m.Disp), true
}
