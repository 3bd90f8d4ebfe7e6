package symbols

import (
	"bytes"
	"testing"
)

// Hand-assembled instructions (AT&T syntax in the names' comments).
var (
	iEndbr64     = []byte{0xf3, 0x0f, 0x1e, 0xfa}             // endbr64
	iMovEAX68    = []byte{0x8b, 0x47, 0x68}                   // mov 0x68(%rdi),%eax
	iMovzwlESI   = []byte{0x0f, 0xb7, 0xf0}                   // movzwl %ax,%esi
	iCmpAX1      = []byte{0x66, 0x83, 0xf8, 0x01}             // cmp $0x1,%ax
	iJe8         = []byte{0x74, 0x07}                         // je .+9
	iJe32        = []byte{0x0f, 0x84, 0x10, 0x00, 0x00, 0x00} // je .+0x16
	iJe66        = []byte{0x66, 0x0f, 0x84, 0x10, 0x00}       // data16 je (not emulated)
	iJmp32       = []byte{0xe9, 0x00, 0x01, 0x00, 0x00}       // jmp .+0x105
	iCall        = []byte{0xe8, 0x00, 0x01, 0x00, 0x00}       // call .+0x105
	iPushR13     = []byte{0x41, 0x55}                         // push %r13
	iPushR13WB   = []byte{0x49, 0x55}                         // rex.WB push %r13 (not emulated)
	iPushRBP     = []byte{0x55}                               // push %rbp
	iPushMem     = []byte{0x41, 0xff, 0x72, 0xf8}             // push -0x8(%r10)
	iLeaR10      = []byte{0x4c, 0x8d, 0x54, 0x24, 0x08}       // lea 0x8(%rsp),%r10
	iAndRSP      = []byte{0x48, 0x83, 0xe4, 0xc0}             // and $-64,%rsp
	iSubRSP      = []byte{0x48, 0x83, 0xec, 0x08}             // sub $0x8,%rsp
	iMovRDXRAX   = []byte{0x48, 0x89, 0xd0}                   // mov %rdx,%rax
	iMovRDIRSI   = []byte{0x48, 0x89, 0xfe}                   // mov %rdi,%rsi
	iMovRBXRAX   = []byte{0x48, 0x89, 0xd8}                   // mov %rbx,%rax
	iMovDIL      = []byte{0x40, 0xb7, 0x01}                   // mov $0x1,%dil
	iMovR8D      = []byte{0x41, 0xb8, 0x01, 0x00, 0x00, 0x00} // mov $0x1,%r8d
	iAddRDI      = []byte{0x48, 0x83, 0xc7, 0x08}             // add $0x8,%rdi
	iTestRDI     = []byte{0x48, 0x85, 0xff}                   // test %rdi,%rdi
	iPopRBX      = []byte{0x5b}                               // pop %rbx
	iXchgRDI     = []byte{0x48, 0x97}                         // xchg %rax,%rdi
	iCmpxchg     = []byte{0xf0, 0x48, 0x0f, 0xb1, 0x0f}       // lock cmpxchg %rcx,(%rdi)
	iMulRCX      = []byte{0x48, 0xf7, 0xe1}                   // mul %rcx
	iImul3       = []byte{0x48, 0x6b, 0xc1, 0x03}             // imul $3,%rcx,%rax
	iCqo         = []byte{0x48, 0x99}                         // cqo
	iCpuid       = []byte{0x0f, 0xa2}                         // cpuid
	iRepStosq    = []byte{0xf3, 0x48, 0xab}                   // rep stos %rax,(%rdi)
	iNop         = []byte{0x90}                               // nop
	iXchgAX      = []byte{0x66, 0x90}                         // xchg %ax,%ax
	iNopl        = []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}       // nopl 0x0(%rax,%rax,1)
	iNopw        = []byte{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00} // nopw 0x0(%rax,%rax,1)
	iCsNopw      = []byte{0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0}
	iPause       = []byte{0xf3, 0x90}                   // pause
	iXchgR8      = []byte{0x41, 0x90}                   // xchg %eax,%r8d
	iRet         = []byte{0xc3}                         // ret
	iJmpRAX      = []byte{0xff, 0xe0}                   // jmp *%rax
	iCallRAX     = []byte{0xff, 0xd0}                   // call *%rax
	iUd2         = []byte{0x0f, 0x0b}                   // ud2
	iMovEDIEDI   = []byte{0x89, 0xff}                   // mov %edi,%edi
	iLeaRIP      = []byte{0x48, 0x8d, 0x05}             // lea disp32(%rip),%rax, disp follows
	iMovEAX0x170 = []byte{0xb8, 0x70, 0x01, 0x00, 0x00} // mov $0x170,%eax
)

func asm(insns ...[]byte) []byte { return bytes.Join(insns, nil) }

func repeat(insn []byte, n int) []byte { return bytes.Repeat(insn, n) }

var probeCases = []struct {
	name string
	code []byte
	keep Regs
	off  uint64
	emul bool
}{
	// Real llama.cpp prologues.
	{"barrier cet", asm(iEndbr64, iMovEAX68, iMovzwlESI, iCmpAX1, iJe8), Arg1, 14, true},
	{"barrier cet keeps rsi", asm(iEndbr64, iMovEAX68, iMovzwlESI, iCmpAX1, iJe8), Arg1 | Arg2, 0, false},
	{"barrier", asm(iMovEAX68, iCmpAX1, iJe8, iJmp32), Arg1, 7, true},
	{"barrier keeps rax", asm(iMovEAX68, iCmpAX1, iJe8), Arg1 | Ret, 0, false},
	{"extra compute forward", asm(iPushR13, iPushR13), Arg1 | Arg2, 0, true},
	{"extra compute forward cet", asm(iEndbr64, iPushR13), Arg1 | Arg2, 4, true},
	{"realigned stack", asm(iLeaR10, iAndRSP, iPushMem, iPushRBP), Arg1 | Arg2 | Arg3, 13, true},
	{"realigned stack keeps rsp", asm(iLeaR10, iAndRSP, iPushMem, iPushRBP), Arg1 | Stack, 0, false},
	{"realigned stack cet", asm(iEndbr64, iLeaR10, iAndRSP, iMovRDXRAX, iPushMem, iPushRBP), Arg1 | Arg2 | Arg3, 20, true},

	// Emulated instructions.
	{"jcc rel32", asm(iTestRDI, iJe32), Arg1, 3, true},
	{"jmp", asm(iEndbr64, iJmp32), Arg1, 4, true},
	{"call", asm(iSubRSP, iCall), Arg1, 4, true},
	{"nop", asm(iEndbr64, iNop), 0, 4, true},
	{"xchg ax ax", asm(iXchgAX), 0, 0, true},
	{"nopl", asm(iNopl), 0, 0, true},
	{"nopw", asm(iNopw), 0, 0, true},

	// Not emulated; skipped when harmless.
	{"cs nopw refused by kernel", asm(iCsNopw, iPushRBP), Arg1, 10, true},
	{"pause", asm(iPause, iPushRBP), Arg1, 2, true},
	{"rex nop is xchg r8", asm(iXchgR8, iPushRBP), Arg1, 2, true},
	{"rex nop is xchg r8, kept", asm(iXchgR8, iPushRBP), Arg5, 0, false},
	{"push with rex.w", asm(iPushR13WB, iPushRBP), Arg1, 2, true},
	{"push with rex.w keeps rsp", asm(iPushR13WB, iPushRBP), Stack, 0, false},
	{"data16 jcc leaves", asm(iJe66, iPushRBP), 0, 0, false},

	// Control flow.
	{"ret", asm(iRet, iPushRBP), 0, 0, false},
	{"jmp indirect", asm(iJmpRAX), 0, 0, false},
	{"call indirect", asm(iCallRAX), 0, 0, false},
	{"ud2", asm(iUd2, iPushRBP), 0, 0, false},

	// Register writes.
	{"test does not write", asm(iTestRDI, iPushRBP), Arg1, 3, true},
	{"mov writes dest", asm(iMovRDIRSI, iPushRBP), Arg2, 0, false},
	{"mov reads source", asm(iMovRDIRSI, iPushRBP), Arg1, 3, true},
	{"byte register", asm(iMovDIL, iPushRBP), Arg1, 0, false},
	{"r8d", asm(iMovR8D, iPushRBP), Arg5, 0, false},
	{"add", asm(iAddRDI, iPushRBP), Arg1, 0, false},
	{"sub rsp", asm(iSubRSP, iPushRBP), Stack, 0, false},
	{"pop", asm(iPopRBX, iPushRBP), Stack, 0, false},
	{"pop other", asm(iPopRBX, iPushRBP), Arg1, 1, true},
	{"xchg writes both", asm(iXchgRDI, iPushRBP), Arg1, 0, false},
	{"cmpxchg writes rax", asm(iCmpxchg, iPushRBP), Ret, 0, false},
	{"cmpxchg keeps memory base", asm(iCmpxchg, iPushRBP), Arg1, 5, true},
	{"mul", asm(iMulRCX, iPushRBP), Arg1, 0, false},
	{"imul three operands", asm(iImul3, iPushRBP), Arg1 | Arg4, 4, true},
	{"cqo", asm(iCqo, iPushRBP), Arg6, 0, false},
	{"mulx writes both", asm([]byte{0xc4, 0xe2, 0xcb, 0xf6, 0xc1}, iPushRBP), Arg2, 0, false}, // mulx %rcx,%rsi,%rax
	{"enter", asm([]byte{0xc8, 0x10, 0x00, 0x00}, iPushRBP), Stack, 0, false},
	{"int3", asm([]byte{0xcc}, iPushRBP), 0, 0, false},
	{"cpuid", asm(iCpuid, iPushRBP), Arg1, 0, false},
	{"rep stos", asm(iRepStosq, iPushRBP), Arg6, 0, false},

	// Limits.
	{"16th instruction", asm(repeat(iMovRBXRAX, 15), iPushRBP), Arg1, 45, true},
	{"17th instruction", asm(repeat(iMovRBXRAX, 16), iPushRBP), Arg1, 0, false},
	{"empty", nil, 0, 0, false},
	{"runs out", asm(iMovRBXRAX), 0, 0, false},
	{"truncated", iMovEAX68[:2], 0, 0, false},
	{"lone prefix", []byte{0xf3}, 0, 0, false},
}

func TestProbeOffset(t *testing.T) {
	for _, tc := range probeCases {
		t.Run(tc.name, func(t *testing.T) {
			off, emul := probeOffsetX86(tc.code, tc.keep)
			if off != tc.off || emul != tc.emul {
				t.Errorf("probeOffset(% x, %#x) = %d, %v; want %d, %v", tc.code, tc.keep, off, emul, tc.off, tc.emul)
			}
		})
	}
}
