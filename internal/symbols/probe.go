package symbols

import (
	"debug/elf"
	"fmt"
)

// Regs is a set of registers by their role in the calling convention, which each
// machine's decoder maps to its own registers (a register includes its narrower views).
type Regs uint32

// Roles callers may need intact at the probe.
const (
	Arg1  Regs = 1 << iota // rdi on x86-64, x0 on arm64
	Arg2                   // rsi, x1
	Arg3                   // rdx, x2
	Arg4                   // rcx, x3
	Arg5                   // r8, x4
	Arg6                   // r9, x5
	Stack                  // rsp, sp
	Ret                    // rax, x0
	// Arg2Struct is a second argument too large for registers, such as llama_batch:
	// x86-64 passes it in memory above the return address, read from the stack pointer,
	// and arm64 a pointer to a copy in x1.
	Arg2Struct
)

// allRegs stands for instructions whose register writes are implicit.
const allRegs = ^Regs(0)

// maxProbeInsns bounds the instructions decoded from a function's entry.
const maxProbeInsns = 16

// isa is what profinfer decodes of one machine's code: pure functions of the code and
// the address it starts at.
type isa struct {
	maxInsn     int // the longest instruction, in bytes
	getterBytes int // enough code for a getter: a landing pad, two instructions and ret
	probeOffset func(code []byte, keep Regs) (uint64, bool)
	getter      func(code []byte, at uint64) (getterKind, uint64)
	pcRel       func(code []byte, at uint64) (uint64, bool, error)
	shapes      map[getterKind]string // the getters' code, named in errors
}

// isas are the machines whose code profinfer decodes.
var isas = map[elf.Machine]*isa{
	elf.EM_X86_64: {maxInsn: 15, getterBytes: len(endbr64) + 2*15,
		probeOffset: probeOffsetX86, getter: getterX86, pcRel: pcRelX86, shapes: shapesX86},
	elf.EM_AARCH64: {maxInsn: 4, getterBytes: 4 * 4,
		probeOffset: probeOffsetARM64, getter: getterARM64, pcRel: pcRelARM64, shapes: shapesARM64},
}

// isa returns the decoder for f's machine, or an error naming it.
func (f *File) isa(sym Symbol) (*isa, error) {
	if m := isas[f.elf.Machine]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("symbols: %s: %s: machine %v, want x86-64 or arm64", f.name, sym.Name, f.elf.Machine)
}

// ProbeOffset returns the offset, relative to sym's start, of the first instruction on
// the function's straight-line entry path that the kernel emulates for uprobes, such that
// no instruction skipped before it writes a register in keep. It returns 0 and
// emulated=false, meaning the probe must sit on the entry and be single-stepped out of
// line (several times the cost of an emulated hit), when no such instruction is among
// the first 16, when a skipped instruction writes a kept register, or when control may
// leave the straight line first (ret, indirect branch, undecodable bytes).
func (f *File) ProbeOffset(sym Symbol, keep Regs) (off uint64, emulated bool, err error) {
	m, err := f.isa(sym)
	if err != nil {
		return 0, false, err
	}
	code, err := f.code(sym, maxProbeInsns*m.maxInsn)
	if err != nil {
		return 0, false, err
	}
	off, emulated = m.probeOffset(code, keep)
	return off, emulated, nil
}

// code returns up to n bytes of sym's code.
func (f *File) code(sym Symbol, n int) ([]byte, error) {
	if sym.Size > 0 && sym.Size < uint64(n) {
		n = int(sym.Size)
	}
	return f.ReadAt(sym.Value, n)
}
