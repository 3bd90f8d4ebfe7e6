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
	return f.loadRet(sym, "mov $imm,%eax", func(mov x86asm.Inst, _ uint64) (uint64, bool) {
		imm, ok := mov.Args[1].(x86asm.Imm)
		switch {
		case !ok || mov.Op != x86asm.MOV:
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
	return f.loadRet(sym, "mov off(%rdi),%eax", func(mov x86asm.Inst, _ uint64) (uint64, bool) {
		m, ok := mov.Args[1].(x86asm.Mem)
		if !ok || mov.Op != x86asm.MOV || mov.Args[0] != x86asm.EAX || m.Base != x86asm.RDI || m.Index != 0 || m.Segment != 0 || m.Disp < 0 {
			return 0, false
		}
		return uint64(m.Disp), true
	})
}

// AddressReturn returns off if sym is `lea off(%rdi),%rax; ret`, possibly after endbr64:
// a getter of the address of a field of its first argument, such as ggml_get_name.
func (f *File) AddressReturn(sym Symbol) (uint64, error) {
	return f.rdiField(sym, "lea off(%rdi),%rax", x86asm.LEA)
}

// PointerReturn returns off if sym is `mov off(%rdi),%rax; ret`, possibly after endbr64:
// a getter of a 64-bit field of its first argument, such as ggml_get_data.
func (f *File) PointerReturn(sym Symbol) (uint64, error) {
	return f.rdiField(sym, "mov off(%rdi),%rax", x86asm.MOV)
}

func (f *File) rdiField(sym Symbol, shape string, op x86asm.Op) (uint64, error) {
	return f.loadRet(sym, shape, func(in x86asm.Inst, _ uint64) (uint64, bool) {
		m, ok := in.Args[1].(x86asm.Mem)
		if !ok || in.Op != op || in.Args[0] != x86asm.RAX || m.Base != x86asm.RDI || m.Index != 0 || m.Segment != 0 || m.Disp < 0 {
			return 0, false
		}
		return uint64(m.Disp), true
	})
}

// StringReturn returns the string sym returns if sym is `lea str(%rip),%rax; ret`,
// possibly after endbr64: a getter of a constant name, such as the CPU backend's
// get_name. Name only sym's address when its file has no symbol for it.
func (f *File) StringReturn(sym Symbol) (string, error) {
	addr, err := f.loadRet(sym, "lea str(%rip),%rax", func(lea x86asm.Inst, next uint64) (uint64, bool) {
		m, ok := lea.Args[1].(x86asm.Mem)
		if !ok || lea.Op != x86asm.LEA || lea.Args[0] != x86asm.RAX || m.Base != x86asm.RIP {
			return 0, false
		}
		return next + uint64(int64(int32(m.Disp))), true // x86asm zero-extends the displacement
	})
	if err != nil {
		return "", err
	}
	return f.CString(addr)
}

// loadRet returns what match makes of sym's first instruction if match accepts it and
// a ret follows, possibly after endbr64; match is also given the address of the next
// instruction, which RIP-relative operands count from. shape names the load in the error.
func (f *File) loadRet(sym Symbol, shape string, match func(load x86asm.Inst, next uint64) (uint64, bool)) (uint64, error) {
	code, err := f.code(sym, len(endbr64)+2*maxInsnLen)
	if err != nil {
		return 0, err
	}
	at := sym.Value
	if bytes.HasPrefix(code, endbr64) {
		code, at = code[len(endbr64):], at+uint64(len(endbr64))
	}
	if load, err := decode(code); err == nil {
		if v, ok := match(load, at+uint64(load.Len)); ok {
			if ret, err := decode(code[load.Len:]); err == nil && ret.Op == x86asm.RET && ret.Args[0] == nil {
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("symbols: %s: %s is not `%s; ret`", f.name, sym.Name, shape)
}
