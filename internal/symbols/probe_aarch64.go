package symbols

import (
	"encoding/binary"

	"golang.org/x/arch/arm64/arm64asm"
)

// probeOffsetARM64 implements ProbeOffset on raw arm64 code.
func probeOffsetARM64(code []byte, keep Regs) (uint64, bool) {
	if keep&Arg2Struct != 0 { // a pointer to the caller's copy
		keep |= Arg2
	}
	for i := 0; i < maxProbeInsns && 4*i+4 <= len(code); i++ {
		word := binary.LittleEndian.Uint32(code[4*i:])
		// The probe fires before the instruction runs, so a simulated instruction's own
		// writes do not matter; every branch is simulated, so none is skipped.
		if isSimulatedARM64(word) {
			return uint64(4 * i), true
		}
		inst, err := arm64asm.Decode(code[4*i:])
		if err != nil || stopsARM64(inst) || writesARM64(inst)&keep != 0 {
			return 0, false
		}
	}
	return 0, false
}

// isSimulatedARM64 reports whether arch/arm64/kernel/probes/decode-insn.c simulates the
// instruction rather than stepping it out of line, on every kernel from 5.10: the
// branches and adr/adrp. 6.13 also simulates nop, which is skipped here as harmless,
// so placement does not depend on the kernel.
func isSimulatedARM64(w uint32) bool {
	switch {
	case w&0x7c000000 == 0x14000000: // b, bl
	case w&0xff000010 == 0x54000000: // b.cond
	case w&0x7e000000 == 0x34000000: // cbz, cbnz
	case w&0x7e000000 == 0x36000000: // tbz, tbnz
	case w&0x1f000000 == 0x10000000: // adr, adrp
	case w&0xff9ffc1f == 0xd61f0000: // br, blr
	case w&0xfffffc1f == 0xd65f0000: // ret
	default:
		return false
	}
	return true
}

// stopsARM64 reports whether inst leaves the straight line without being simulated: an
// exception. (Branches are simulated; authenticated ones do not decode.)
func stopsARM64(inst arm64asm.Inst) bool {
	switch inst.Op {
	case arm64asm.SVC, arm64asm.HVC, arm64asm.SMC, arm64asm.BRK, arm64asm.HLT,
		arm64asm.DCPS1, arm64asm.DCPS2, arm64asm.DCPS3, arm64asm.ERET, arm64asm.DRPS:
		return true
	}
	return false
}

// writesARM64 returns the keepable registers inst may write: its first operand, the
// second of a pair load, and a base register written back; none for stores, compares
// and hints, whose first operand is read.
func writesARM64(inst arm64asm.Inst) Regs {
	var w Regs
	for _, a := range inst.Args {
		if m, ok := a.(arm64asm.MemImmediate); ok && m.Mode != arm64asm.AddrOffset {
			w |= regARM64(arm64asm.RegSP(m.Base))
		}
	}
	switch inst.Op {
	case arm64asm.STR, arm64asm.STRB, arm64asm.STRH, arm64asm.STUR, arm64asm.STURB, arm64asm.STURH,
		arm64asm.STP, arm64asm.STNP, arm64asm.STLR, arm64asm.STLRB, arm64asm.STLRH,
		arm64asm.STTR, arm64asm.STTRB, arm64asm.STTRH,
		arm64asm.ST1, arm64asm.ST2, arm64asm.ST3, arm64asm.ST4,
		arm64asm.CMP, arm64asm.CMN, arm64asm.TST, arm64asm.CCMP, arm64asm.CCMN,
		arm64asm.FCMP, arm64asm.FCMPE, arm64asm.FCCMP, arm64asm.FCCMPE,
		arm64asm.NOP, arm64asm.HINT, arm64asm.YIELD, arm64asm.SEV, arm64asm.SEVL,
		arm64asm.DMB, arm64asm.DSB, arm64asm.ISB, arm64asm.CLREX,
		arm64asm.PRFM, arm64asm.PRFUM, arm64asm.MSR:
		return w
	case arm64asm.LDP, arm64asm.LDNP, arm64asm.LDPSW, arm64asm.LDXP, arm64asm.LDAXP:
		w |= regARM64(inst.Args[1])
	}
	return w | regARM64(inst.Args[0])
}

// regARM64 maps a register operand to its role; the zero register and SIMD registers
// have none.
func regARM64(a arm64asm.Arg) Regs {
	var r arm64asm.Reg
	switch a := a.(type) {
	case arm64asm.Reg:
		r = a
	case arm64asm.RegSP:
		if arm64asm.Reg(a) == arm64asm.SP || arm64asm.Reg(a) == arm64asm.WSP {
			return Stack
		}
		r = arm64asm.Reg(a)
	default:
		return 0
	}
	var n int
	switch {
	case r >= arm64asm.X0 && r <= arm64asm.X30:
		n = int(r - arm64asm.X0)
	case r >= arm64asm.W0 && r <= arm64asm.W30:
		n = int(r - arm64asm.W0)
	default:
		return 0
	}
	switch {
	case n == 0:
		return Arg1 | Ret
	case n < 6:
		return Arg1 << n
	}
	return 0
}
