package symbols

import (
	"debug/elf"
	"fmt"
	"slices"
)

// Regs is a bit set of x86-64 general-purpose register families; a family
// includes the register's 32-, 16- and 8-bit parts.
type Regs uint32

// Register families callers may need intact at the probe, such as the
// System V argument registers.
const (
	RDI Regs = 1 << iota
	RSI
	RDX
	RCX
	R8
	R9
	RSP
	RAX
)

// allRegs stands for instructions whose register writes are implicit.
const allRegs = ^Regs(0)

const (
	maxProbeInsns = 16
	maxInsnLen    = 15
)

// ProbeOffset returns the offset, relative to sym's start, of the first
// instruction on the function's straight-line entry path that the x86-64
// kernel emulates for uprobes, such that no instruction skipped before it
// writes a register in keep. It returns 0 and emulated=false, meaning the
// probe must sit on the entry and be single-stepped (~10x the cost of an
// emulated hit), when no such instruction is among the first 16, when a
// skipped instruction writes a kept register, or when control may leave
// the straight line first (ret, indirect branch, undecodable bytes).
func (f *File) ProbeOffset(sym Symbol, keep Regs) (off uint64, emulated bool, err error) {
	code, err := f.code(sym, maxProbeInsns*maxInsnLen)
	if err != nil {
		return 0, false, err
	}
	off, emulated = probeOffset(code, keep)
	return off, emulated, nil
}

// code returns up to n bytes of sym's code.
func (f *File) code(sym Symbol, n int) ([]byte, error) {
	if f.elf.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("symbols: %s: %s: machine %v, want x86-64", f.name, sym.Name, f.elf.Machine)
	}
	if sym.Size > 0 && sym.Size < uint64(n) {
		n = int(sym.Size)
	}
	return f.ReadAt(sym.Value, n)
}

// probeOffset implements ProbeOffset on raw code.
func probeOffset(code []byte, keep Regs) (uint64, bool) {
	off := 0
	for range maxProbeInsns {
		if off >= len(code) {
			return 0, false
		}
		inst, err := decode(code[off:])
		if err != nil {
			return 0, false
		}
		// The probe fires before the instruction runs, so an emulated
		// instruction's own writes do not matter.
		if isEmulated(code[off : off+inst.Len]) {
			return uint64(off), true
		}
		if leavesLine(inst) || writes(inst)&keep != 0 {
			return 0, false
		}
		off += inst.Len
	}
	return 0, false
}

// isEmulated reports whether arch/x86/kernel/uprobes.c (6.18) emulates the
// instruction b rather than single-stepping it out of line.
func isEmulated(b []byte) bool {
	i := 0
	for i < len(b) && isLegacyPrefix(b[i]) {
		i++
	}
	prefixes := b[:i]
	// uprobe_init_insn refuses ES/CS/SS/DS overrides and LOCK outright
	// (is_prefix_bad), so e.g. "data16 cs nopw" padding cannot be probed.
	for _, p := range prefixes {
		switch p {
		case 0x26, 0x2e, 0x36, 0x3e, 0xf0:
			return false
		}
	}
	var rex byte
	if i < len(b) && b[i]&0xf0 == 0x40 {
		rex = b[i]
		i++
	}
	op := b[i:]
	if len(op) == 0 {
		return false
	}
	switch {
	case op[0] == 0x90: // NOP; REP NOP is PAUSE and REX.B NOP is xchg %r8,%rax
		return !slices.Contains(prefixes, 0xf3) && rex&1 == 0
	case len(op) >= 3 && op[0] == 0x0f && op[1] == 0x1f: // NOPL: 0f 1f /0
		return (op[2]>>3)&7 == 0 && rex&4 == 0
	case op[0] >= 0x50 && op[0] <= 0x57: // push_setup_xol_ops: push %reg, REX 0x41 only
		return len(b) == 1 || (len(b) == 2 && b[0] == 0x41)
	}
	// branch_setup_xol_ops rejects operand-size overridden branches.
	if slices.Contains(prefixes, 0x66) {
		return false
	}
	switch {
	case op[0] == 0xeb, op[0] == 0xe9, op[0] == 0xe8: // jmp rel8/rel32, call rel32
		return true
	case op[0] >= 0x70 && op[0] <= 0x7f: // jcc rel8
		return true
	case len(op) >= 2 && op[0] == 0x0f && op[1] >= 0x80 && op[1] <= 0x8f: // jcc rel32
		return true
	}
	return false
}

func isLegacyPrefix(b byte) bool {
	switch b {
	case 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67, 0xf0, 0xf2, 0xf3:
		return true
	}
	return false
}
