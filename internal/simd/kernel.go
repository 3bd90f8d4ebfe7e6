package simd

import (
	"debug/elf"
	"encoding/binary"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/profinfer/profinfer/internal/symbols"
)

// dotKernels are the CPU backend's dot products that its matrix multiplications run
// on, each compiled for the widest SIMD the build allows: q4_0 weights' and F16's.
var dotKernels = []string{"ggml_vec_dot_q4_0_q8_0", "ggml_vec_dot_f16"}

// maxKernel bounds the code decoded of one kernel; they are a few KB.
const maxKernel = 64 << 10

// kernels is the highest level the dot kernels in f show, each the widest it may use:
// ggml's q4_0 kernel has no AVX-512 code without VNNI, its F16 one has. "" where f has
// none.
func kernels(f *symbols.File) string {
	best := -1
	for _, name := range dotKernels {
		sym, ok := f.Function(name)
		if !ok || sym.Size == 0 {
			continue
		}
		code, err := f.ReadAt(sym.Value, int(min(sym.Size, maxKernel)))
		if err != nil {
			continue
		}
		switch f.Machine() {
		case elf.EM_X86_64:
			best = max(best, kernelX86(code))
		case elf.EM_AARCH64:
			best = max(best, kernelARM64(code))
		}
	}
	if best < 0 {
		return ""
	}
	return scales[f.Machine()][best].name
}

// Instructions that only a rung's SIMD has, without a VEX or EVEX prefix.
var (
	sse3Ops  = map[x86asm.Op]bool{x86asm.HADDPS: true, x86asm.HADDPD: true, x86asm.MOVSHDUP: true, x86asm.MOVSLDUP: true, x86asm.LDDQU: true}
	ssse3Ops = map[x86asm.Op]bool{x86asm.PSHUFB: true, x86asm.PMADDUBSW: true, x86asm.PABSB: true, x86asm.PABSW: true,
		x86asm.PABSD: true, x86asm.PSIGNB: true, x86asm.PSIGNW: true, x86asm.PHADDW: true, x86asm.PHADDD: true, x86asm.PMULHRSW: true}
)

// avx1Ops are AVX's own VP instructions on ymm: the integer ones there need AVX2.
var avx1Ops = map[x86asm.Op]bool{x86asm.VPERM2F128: true, x86asm.VPERMILPS: true, x86asm.VPERMILPD: true, x86asm.VPTEST: true}

// kernelX86 is the rung of x86 that code's vector instructions need: zmm registers
// AVX-512, an integer op on ymm AVX2, VEX coding AVX, VPDPBUSD VNNI; and below, the
// SSE3 and SSSE3 instructions. Bytes it cannot decode are stepped over.
func kernelX86(code []byte) int {
	best := 0
	for len(code) > 0 {
		inst, err := x86asm.Decode(code, 64)
		if err != nil || inst.Len == 0 {
			code = code[1:]
			continue
		}
		code = code[inst.Len:]
		var vex, evex, ymm, zmm bool
		for _, p := range inst.Prefix {
			vex, evex = vex || p.IsVEX(), evex || p.IsEVEX()
		}
		for _, a := range inst.Args {
			if r, ok := a.(x86asm.Reg); ok {
				ymm, zmm = ymm || r >= x86asm.Y0 && r <= x86asm.Y31, zmm || r >= x86asm.Z0 && r <= x86asm.Z31
			}
		}
		op := inst.Op.String()
		var need string
		switch {
		case (op == "VPDPBUSD" || op == "VPDPBUSDS") && (evex || zmm):
			need = "avx512_vnni"
		case zmm:
			need = "avx512"
		case op == "VPDPBUSD" || op == "VPDPBUSDS":
			need = "avx_vnni"
		case ymm && strings.HasPrefix(op, "VP") && !avx1Ops[inst.Op]:
			need = "avx2"
		case ymm || vex || evex:
			need = "avx"
		case ssse3Ops[inst.Op]:
			need = "ssse3"
		case sse3Ops[inst.Op]:
			need = "sse3"
		}
		best = max(best, Rank(need))
	}
	return best
}

// kernelARM64 is the rung of arm64 that code's instructions need: SVE's encoding space,
// SMMLA and its kin (i8mm), SDOT and UDOT (dotprod); NEON otherwise, as every arm64 has.
func kernelARM64(code []byte) int {
	best := 0
	for i := 0; i+4 <= len(code); i += 4 {
		w := binary.LittleEndian.Uint32(code[i:])
		var need string
		switch {
		case w>>25&0xf == 0x2: // op1 0010: SVE
			need = "sve"
		case w&0xffe0fc00 == 0x4e80a400 || w&0xffe0fc00 == 0x6e80a400 || w&0xffe0fc00 == 0x4e80ac00: // smmla, ummla, usmmla
			need = "i8mm"
		case w&0xbfe0fc00 == 0x0e809400 || w&0xbfc0f400 == 0x0f80e000 || // sdot, udot: vector, by element
			w&0xbfe0fc00 == 0x2e809400 || w&0xbfc0f400 == 0x2f80e000:
			need = "dotprod"
		}
		best = max(best, Rank(need))
	}
	return best
}
