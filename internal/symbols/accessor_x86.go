package symbols

import (
	"bytes"

	"golang.org/x/arch/x86/x86asm"
)

// shapesX86 are x86-64's getters.
var shapesX86 = map[getterKind]string{
	retImm:       "mov $imm,%eax",
	retField32:   "mov off(%rdi),%eax",
	retFieldAddr: "lea off(%rdi),%rax",
	retField64:   "mov off(%rdi),%rax",
	retPCRel:     "lea str(%rip),%rax",
}

// pcRelX86 finds the first RIP-relative memory operand in code at address at.
func pcRelX86(code []byte, at uint64) (uint64, bool, error) {
	off := 0
	for range maxAccessorInsns {
		if off >= len(code) {
			break
		}
		inst, err := decode(code[off:])
		if err != nil {
			return 0, false, err
		}
		off += inst.Len
		for _, a := range inst.Args {
			if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.RIP {
				// The displacement counts from the next instruction; x86asm
				// zero-extends it, the CPU sign-extends it.
				return at + uint64(off) + uint64(int64(int32(m.Disp))), true, nil
			}
		}
	}
	return 0, false, nil
}

// getterX86 classifies code at address at as a getter: one load into %eax or %rax, then
// ret, possibly after endbr64.
func getterX86(code []byte, at uint64) (getterKind, uint64) {
	if bytes.HasPrefix(code, endbr64) {
		code, at = code[len(endbr64):], at+uint64(len(endbr64))
	}
	load, err := decode(code)
	if err != nil {
		return 0, 0
	}
	if ret, err := decode(code[load.Len:]); err != nil || ret.Op != x86asm.RET || ret.Args[0] != nil {
		return 0, 0
	}
	dst := load.Args[0]
	if load.Op == x86asm.XOR && load.Args[1] == dst && (dst == x86asm.EAX || dst == x86asm.RAX) {
		return retImm, 0 // a constant 0, as a compiler writes it
	}
	switch src := load.Args[1].(type) {
	case x86asm.Imm:
		switch {
		case load.Op != x86asm.MOV:
		case dst == x86asm.EAX: // x86asm sign-extends imm32; a 32-bit write zero-extends
			return retImm, uint64(uint32(src))
		case dst == x86asm.RAX:
			return retImm, uint64(src)
		}
	case x86asm.Mem:
		switch {
		case src.Base == x86asm.RIP && load.Op == x86asm.LEA && dst == x86asm.RAX:
			next := at + uint64(load.Len)
			return retPCRel, next + uint64(int64(int32(src.Disp))) // x86asm zero-extends the displacement
		case src.Base != x86asm.RDI || src.Index != 0 || src.Segment != 0 || src.Disp < 0:
		case load.Op == x86asm.MOV && dst == x86asm.EAX:
			return retField32, uint64(src.Disp)
		case load.Op == x86asm.LEA && dst == x86asm.RAX:
			return retFieldAddr, uint64(src.Disp)
		case load.Op == x86asm.MOV && dst == x86asm.RAX:
			return retField64, uint64(src.Disp)
		}
	}
	return 0, 0
}
