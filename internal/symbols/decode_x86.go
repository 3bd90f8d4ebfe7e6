package symbols

import (
	"bytes"
	"errors"

	"golang.org/x/arch/x86/x86asm"
)

var errUnknown = errors.New("unknown instruction")

// x86asm does not know the CET landing pads; they are 4-byte hint NOPs.
var (
	endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}
	endbr32 = []byte{0xf3, 0x0f, 0x1e, 0xfb}
)

// decode decodes the 64-bit instruction at the start of code, reporting
// ENDBR64/ENDBR32 as NOP.
func decode(code []byte) (x86asm.Inst, error) {
	if bytes.HasPrefix(code, endbr64) || bytes.HasPrefix(code, endbr32) {
		return x86asm.Inst{Op: x86asm.NOP, Len: len(endbr64)}, nil
	}
	inst, err := x86asm.Decode(code, 64)
	if err == nil && inst.Op == 0 {
		// x86asm returns a lone prefix as an instruction without an opcode.
		err = errUnknown
	}
	return inst, err
}

// leavesLine reports whether inst may transfer control elsewhere. Callers
// check it only for instructions the kernel does not emulate, which is
// where direct jumps and calls end up when they carry odd prefixes.
func leavesLine(inst x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.JMP, x86asm.CALL, x86asm.LJMP, x86asm.LCALL,
		x86asm.RET, x86asm.LRET, x86asm.IRET, x86asm.IRETD, x86asm.IRETQ,
		x86asm.INT, x86asm.INTO, x86asm.UD0, x86asm.UD1, x86asm.UD2, x86asm.HLT,
		x86asm.SYSENTER, x86asm.SYSEXIT, x86asm.SYSRET, x86asm.XABORT:
		return true
	}
	for _, a := range inst.Args {
		if _, ok := a.(x86asm.Rel); ok { // jcc, loop, jrcxz, xbegin
			return true
		}
	}
	return false
}

// writes returns the keepable registers inst may write. The destination is
// Args[0] in x86asm's Intel operand order.
func writes(inst x86asm.Inst) Regs {
	a0, a1 := inst.Args[0], inst.Args[1]
	switch inst.Op {
	case x86asm.CMP, x86asm.TEST, x86asm.BT, x86asm.NOP:
		return 0
	case x86asm.PUSH, x86asm.ENTER:
		return Stack
	case x86asm.POP:
		return Stack | family(a0)
	case x86asm.XCHG, x86asm.XADD, x86asm.MULX:
		return family(a0) | family(a1)
	case x86asm.CMPXCHG:
		return family(a0) | family(a1) | Ret
	case x86asm.IMUL:
		if a1 == nil { // one-operand form writes RDX:RAX
			return allRegs
		}
	case x86asm.MUL, x86asm.DIV, x86asm.IDIV, x86asm.CMPXCHG8B, x86asm.CMPXCHG16B,
		x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ,
		x86asm.STOSB, x86asm.STOSW, x86asm.STOSD, x86asm.STOSQ,
		x86asm.LODSB, x86asm.LODSW, x86asm.LODSD, x86asm.LODSQ,
		x86asm.SCASB, x86asm.SCASW, x86asm.SCASD, x86asm.SCASQ,
		x86asm.CMPSB, x86asm.CMPSW, x86asm.CMPSD, x86asm.CMPSQ,
		x86asm.INSB, x86asm.INSW, x86asm.INSD, x86asm.OUTSB, x86asm.OUTSW, x86asm.OUTSD,
		x86asm.XLATB:
		return allRegs
	}
	if a0 == nil {
		// Operand-less instructions act on fixed registers (CQO, CPUID,
		// RDTSC, SYSCALL, LEAVE, PUSHF, ...); only a few touch none.
		switch inst.Op {
		case x86asm.PAUSE, x86asm.LFENCE, x86asm.MFENCE, x86asm.SFENCE, x86asm.CLD, x86asm.VZEROUPPER:
			return 0
		}
		return allRegs
	}
	return family(a0)
}

// family maps a register to its keepable family, 0 for all others.
func family(a x86asm.Arg) Regs {
	r, ok := a.(x86asm.Reg)
	if !ok {
		return 0
	}
	switch r {
	case x86asm.RDI, x86asm.EDI, x86asm.DI, x86asm.DIB:
		return Arg1
	case x86asm.RSI, x86asm.ESI, x86asm.SI, x86asm.SIB:
		return Arg2
	case x86asm.RDX, x86asm.EDX, x86asm.DX, x86asm.DL, x86asm.DH:
		return Arg3
	case x86asm.RCX, x86asm.ECX, x86asm.CX, x86asm.CL, x86asm.CH:
		return Arg4
	case x86asm.R8, x86asm.R8L, x86asm.R8W, x86asm.R8B:
		return Arg5
	case x86asm.R9, x86asm.R9L, x86asm.R9W, x86asm.R9B:
		return Arg6
	case x86asm.RSP, x86asm.ESP, x86asm.SP, x86asm.SPB:
		return Stack
	case x86asm.RAX, x86asm.EAX, x86asm.AX, x86asm.AL, x86asm.AH:
		return Ret
	}
	return 0
}
