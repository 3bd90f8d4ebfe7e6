package symbols

import "slices"

// probeOffsetX86 implements ProbeOffset on raw x86-64 code.
func probeOffsetX86(code []byte, keep Regs) (uint64, bool) {
	if keep&Arg2Struct != 0 { // in memory above the return address
		keep |= Stack
	}
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
