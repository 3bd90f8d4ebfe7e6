package symbols

import "encoding/binary"

// Encodings of the few arm64 instructions getters are made of, decoded from their bits:
// arm64asm does not export the offsets of memory operands.
const (
	insnRet   = 0xd65f03c0 // ret
	insnBtiC  = 0xd503245f // bti c
	ldrW      = 0xb9400000 // ldr wt, [xn, #imm12*4]
	ldrX      = 0xf9400000 // ldr xt, [xn, #imm12*8]
	addX      = 0x91000000 // add xd, xn, #imm12 (shift 0)
	movzW     = 0x52800000 // movz wd, #imm16, lsl #16*hw
	movzX     = 0xd2800000 // movz xd, #imm16, lsl #16*hw
	adrpMask  = 0x9f000000
	adrpMatch = 0x90000000
)

// words decodes code into little-endian instruction words.
func words(code []byte) []uint32 {
	w := make([]uint32, 0, len(code)/4)
	for i := 0; i+4 <= len(code); i += 4 {
		w = append(w, binary.LittleEndian.Uint32(code[i:]))
	}
	return w
}

// imm12 is an ldr's or add's 12-bit immediate; rd and rn its registers.
func imm12(w uint32) uint64 { return uint64(w >> 10 & 0xfff) }
func rd(w uint32) uint32    { return w & 0x1f }
func rn(w uint32) uint32    { return w >> 5 & 0x1f }

// adrpTarget is the 4 KiB page an adrp at pc addresses.
func adrpTarget(w uint32, pc uint64) uint64 {
	imm := int64(w>>29&3|(w>>5&0x7ffff)<<2) << 43 >> 31 // 21 bits, sign-extended, times 4096
	return pc&^0xfff + uint64(imm)
}

// getterARM64 classifies code at address at as a getter: one instruction into x0 or w0
// from x0 or a constant, or adrp and add forming an address in x0, then ret.
func getterARM64(code []byte, at uint64) (getterKind, uint64) {
	w := words(code)
	if len(w) > 0 && w[0] == insnBtiC {
		w, at = w[1:], at+4
	}
	switch {
	case len(w) >= 3 && w[0]&adrpMask == adrpMatch && rd(w[0]) == 0 &&
		w[1]&^0x3ffc00 == addX && rd(w[1]) == 0 && rn(w[1]) == 0 && w[2] == insnRet:
		return retPCRel, adrpTarget(w[0], at) + imm12(w[1])
	case len(w) < 2 || w[1] != insnRet || rd(w[0]) != 0:
		return 0, 0
	case w[0]&0xff80001f == movzW || w[0]&0xff80001f == movzX:
		return retImm, uint64(w[0]>>5&0xffff) << (16 * (w[0] >> 21 & 3))
	case rn(w[0]) != 0:
	case w[0]&^0x3ffc00 == ldrW:
		return retField32, 4 * imm12(w[0])
	case w[0]&^0x3ffc00 == addX:
		return retFieldAddr, imm12(w[0])
	case w[0]&^0x3ffc00 == ldrX:
		return retField64, 8 * imm12(w[0])
	}
	return 0, 0
}

// shapesARM64 are arm64's getters.
var shapesARM64 = map[getterKind]string{
	retImm:       "mov w0, #imm",
	retField32:   "ldr w0, [x0, #off]",
	retFieldAddr: "add x0, x0, #off",
	retField64:   "ldr x0, [x0, #off]",
	retPCRel:     "adrp x0, str; add x0, x0, :lo12:str",
}

// pcRelARM64 finds the first adrp in code at address at, and the add or load that
// completes its address, as ggml_op_name and ggml_version form the address of their data.
func pcRelARM64(code []byte, at uint64) (uint64, bool, error) {
	w := words(code)
	for i, insn := range w {
		if insn&adrpMask != adrpMatch {
			continue
		}
		page := adrpTarget(insn, at+uint64(4*i))
		for _, next := range w[i+1:] {
			if rn(next) != rd(insn) {
				continue
			}
			switch {
			case next&^0x3ffc00&^0x3ff == addX:
				return page + imm12(next), true, nil
			case next&^0x3ffc00&^0x3ff == ldrX:
				return page + 8*imm12(next), true, nil
			}
		}
		return 0, false, nil
	}
	return 0, false, nil
}
