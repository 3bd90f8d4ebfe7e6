package symbols

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"testing"
)

// maxFuzzSyms bounds the work per input; corrupt tables can be huge.
const maxFuzzSyms = 64

func FuzzNewFile(f *testing.F) {
	f.Add(buildELF(testFuncs(), false))
	f.Add(buildELF(testFuncs(), true))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := NewFile(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		file.BuildID()
		names := slices.Sorted(maps.Keys(file.syms))
		for _, name := range names[:min(len(names), maxFuzzSyms)] {
			sym, ok := file.Symbol(name)
			if !ok || sym.Name != name {
				t.Fatalf("Symbol(%q) = %+v, %v", name, sym, ok)
			}
			off, emul, err := file.ProbeOffset(sym, Arg1|Arg2|Stack)
			if (!emul || err != nil) && off != 0 {
				t.Fatalf("ProbeOffset(%+v) = %d, %v, %v", sym, off, emul, err)
			}
			file.PCRelTarget(sym)
			file.ImmediateReturn(sym)
			file.FieldReturn(sym)
			file.AddressReturn(sym)
			file.PointerReturn(sym)
			file.StringReturn(sym)
			if at, ok := file.At(sym.Value); sym.Size > 0 && (!ok || at.Value != sym.Value) {
				t.Fatalf("At(%#x) = %+v, %v; want a symbol at %#x", sym.Value, at, ok, sym.Value)
			}
			file.CString(sym.Value)
		}
		file.Missing(names...)
		// Where the in-place scan reads the tables too, it finds every name they hold.
		if len(names) > maxFuzzSyms {
			names = names[:maxFuzzSyms]
		}
		found, err := defines(bytes.NewReader(data), "fuzz", names)
		if err != nil {
			return
		}
		for i, name := range names {
			if !found[i] {
				t.Fatalf("defines misses %q", name)
			}
		}
	})
}

func FuzzProbeOffset(f *testing.F) {
	for _, tc := range probeCases {
		f.Add(tc.code, uint32(tc.keep))
	}
	f.Fuzz(func(t *testing.T, code []byte, keep uint32) {
		off, emul := probeOffsetX86(code, Regs(keep))
		switch {
		case !emul && off != 0:
			t.Fatalf("probeOffset(% x) = %d, false", code, off)
		case emul && off >= uint64(len(code)):
			t.Fatalf("probeOffset(% x) = %d past the code", code, off)
		case emul:
			if inst, err := decode(code[off:]); err != nil || !isEmulated(code[off:off+uint64(inst.Len)]) {
				t.Fatalf("probeOffset(% x) = %d, not an emulated instruction", code, off)
			}
		}
	})
}

func FuzzProbeOffsetARM64(f *testing.F) {
	for _, tc := range arm64ProbeCases {
		f.Add(tc.code, uint32(tc.keep))
	}
	f.Fuzz(func(t *testing.T, code []byte, keep uint32) {
		off, emul := probeOffsetARM64(code, Regs(keep))
		switch {
		case !emul && off != 0:
			t.Fatalf("probeOffsetARM64(% x) = %d, false", code, off)
		case emul && (off%4 != 0 || off+4 > uint64(len(code))):
			t.Fatalf("probeOffsetARM64(% x) = %d, not an instruction of the code", code, off)
		case emul && !isSimulatedARM64(binary.LittleEndian.Uint32(code[off:])):
			t.Fatalf("probeOffsetARM64(% x) = %d, not a simulated instruction", code, off)
		}
	})
}
