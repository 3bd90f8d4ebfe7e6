package symbols

import (
	"encoding/binary"
	"testing"
)

// Hand-assembled arm64 instructions, checked against GNU as.
const (
	aStpFP      = 0xa9be7bfd // stp x29, x30, [sp, #-32]!
	aStrX19     = 0xf9000bf3 // str x19, [sp, #16]
	aMovFP      = 0x910003fd // mov x29, sp
	aBl         = 0x94000010 // bl .+64
	aMovW19W0   = 0x2a0003f3 // mov w19, w0
	aCmpW0      = 0x7100081f // cmp w0, #2
	aBlo        = 0x54000103 // b.lo .+32
	aAdrpX1     = 0x90000001 // adrp x1, .
	aAddX1      = 0x91392c21 // add x1, x1, #0xe4b
	aMovX19X1   = 0xaa0103f3 // mov x19, x1
	aMovX21X0   = 0xaa0003f5 // mov x21, x0
	aSubSP      = 0xd10583ff // sub sp, sp, #0x160
	aCbzX0      = 0xb4000080 // cbz x0, .+16
	aLdrX8      = 0xf9400008 // ldr x8, [x0]
	aBrX4       = 0xd61f0080 // br x4
	aRet        = 0xd65f03c0 // ret
	aNop        = 0xd503201f // nop
	aBtiC       = 0xd503245f // bti c
	aPaciasp    = 0xd503233f // paciasp
	aMovX0X19   = 0xaa1303e0 // mov x0, x19
	aMovX1      = 0xd28000a1 // mov x1, #5
	aLdpX2X1    = 0xa94107e2 // ldp x2, x1, [sp, #16]
	aStrPostX1  = 0xf8008420 // str x0, [x1], #8
	aSvc        = 0xd4000001 // svc #0
	aTbz        = 0x36180040 // tbz w0, #3, .+8
	aAdrX0      = 0x10000000 // adr x0, .
	aCmpX1      = 0xf100003f // cmp x1, #0
	aBlrX8      = 0xd63f0100 // blr x8
	aLdrW0      = 0xb9400800 // ldr w0, [x0, #8]
	aLdrX0      = 0xf9407c00 // ldr x0, [x0, #248]
	aAddX0      = 0x91040000 // add x0, x0, #0x100
	aMovW0      = 0x52802e00 // mov w0, #0x170
	aUdf        = 0x00000000 // udf #0
	aStpPreX0X1 = 0xa9bf07e0 // stp x0, x1, [sp, #-16]!
	aRetaa      = 0xd65f0bff // retaa
)

func a64(words ...uint32) []byte {
	var b []byte
	for _, w := range words {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

var arm64ProbeCases = []struct {
	name string
	code []byte
	keep Regs
	off  uint64
	emul bool
}{
	// Prologues of node-llama-cpp's arm64 prebuilt (clang).
	{"llama_decode", a64(aStpFP, aStrX19, aMovFP, aBl), Arg1 | Arg2Struct, 12, true},
	{"llama_decode reading sp", a64(aStpFP, aStrX19, aMovFP, aBl), Stack, 0, false},
	{"ggml_graph_compute", a64(aStpFP, aMovFP, aSubSP, aMovX19X1, aMovX21X0, aBl), Arg1 | Arg2, 20, true},
	{"sched compute", a64(aSubSP, aStpFP, aMovFP, aCbzX0), Arg2, 12, true},
	{"entry is a branch", a64(aCbzX0, aLdrX8, aBrX4), Arg1 | Arg2, 0, true},

	// Simulated instructions.
	{"b.cond", a64(aCmpW0, aBlo), Arg1, 4, true},
	{"tbz", a64(aMovW19W0, aTbz), Arg1, 4, true},
	{"adrp", a64(aStpFP, aAdrpX1, aAddX1), Arg2, 4, true},
	{"adr", a64(aAdrX0), Arg1, 0, true},
	{"br", a64(aBrX4), 0, 0, true},
	{"blr", a64(aMovFP, aBlrX8), Arg1, 4, true},
	{"ret", a64(aRet), 0, 0, true},

	// Stepped, and skipped when harmless: nop (simulated from 6.13 only), landing pads.
	{"nop", a64(aNop, aBl), 0, 4, true},
	{"bti c", a64(aBtiC, aBl), Arg1, 4, true},
	{"paciasp", a64(aPaciasp, aStpFP, aBl), Arg1 | Arg2, 8, true},

	// Register writes.
	{"mov writes x0", a64(aMovX0X19, aBl), Arg1, 0, false},
	{"mov x0 is the return register", a64(aMovX0X19, aBl), Ret, 0, false},
	{"mov reads x0", a64(aMovX21X0, aBl), Arg1, 4, true},
	{"w register", a64(aMovW19W0, aMovX1, aBl), Arg2, 0, false},
	{"ldp writes both", a64(aLdpX2X1, aBl), Arg2, 0, false},
	{"ldp writes its first", a64(aLdpX2X1, aBl), Arg3, 0, false},
	{"post-index writes its base", a64(aStrPostX1, aBl), Arg2, 0, false},
	{"a store writes no data register", a64(aStrPostX1, aBl), Arg1, 4, true},
	{"pre-index writes sp", a64(aStpPreX0X1, aBl), Stack, 0, false},
	{"pre-index stores x0 and x1", a64(aStpPreX0X1, aBl), Arg1 | Arg2, 4, true},
	{"cmp writes nothing", a64(aCmpX1, aBl), Arg2, 4, true},
	{"sub sp", a64(aSubSP, aBl), Stack, 0, false},
	{"ldr", a64(aLdrX8, aBl), Arg1, 4, true},

	// Leaving the line, and limits.
	{"svc", a64(aSvc, aBl), 0, 0, false},
	{"undecodable", a64(aUdf, aBl), 0, 0, false},
	{"authenticated return", a64(aRetaa, aBl), 0, 0, false},
	{"16th instruction", a64(aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aBl), 0, 60, true},
	{"17th instruction", a64(aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aMovFP, aBl), 0, 0, false},
	{"empty", nil, 0, 0, false},
	{"truncated", a64(aMovFP)[:3], 0, 0, false},
}

func TestProbeOffsetARM64(t *testing.T) {
	for _, tc := range arm64ProbeCases {
		t.Run(tc.name, func(t *testing.T) {
			off, emul := probeOffsetARM64(tc.code, tc.keep)
			if off != tc.off || emul != tc.emul {
				t.Errorf("probeOffsetARM64(% x, %#x) = %d, %v; want %d, %v", tc.code, tc.keep, off, emul, tc.off, tc.emul)
			}
		})
	}
}

func TestGetterARM64(t *testing.T) {
	const at = 0x1000
	for _, tc := range []struct {
		name string
		code []byte
		kind getterKind
		v    uint64
	}{
		{"ggml_get_name", a64(aAddX0, aRet), retFieldAddr, 0x100},
		{"ggml_get_data", a64(aLdrX0, aRet), retField64, 248},
		{"llama_n_ctx", a64(aLdrW0, aRet), retField32, 8},
		{"ggml_tensor_overhead", a64(aMovW0, aRet), retImm, 0x170},
		{"after bti c", a64(aBtiC, aMovW0, aRet), retImm, 0x170},
		{"movz lsl 16", a64(0x52a00020, aRet), retImm, 0x10000},                           // mov w0, #0x10000
		{"a constant string", a64(0xb0000000, 0x91004000, aRet), retPCRel, 0x2000 + 0x10}, // adrp x0, .+0x1000; add x0, x0, #0x10
		{"no ret", a64(aAddX0, aNop), 0, 0},
		{"another register", a64(aAddX1, aRet), 0, 0},
		{"from another base", a64(aLdrX8, aRet), 0, 0},
		{"two loads", a64(aLdrX8, aLdrX0, aRet), 0, 0},
		{"empty", nil, 0, 0},
	} {
		if kind, v := getterARM64(tc.code, at); kind != tc.kind || v != tc.v {
			t.Errorf("%s: getterARM64 = %d, %#x; want %d, %#x", tc.name, kind, v, tc.kind, tc.v)
		}
	}
}
