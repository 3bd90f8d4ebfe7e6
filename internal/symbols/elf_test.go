package symbols

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Layout of the objects buildELF writes: one PT_LOAD maps the file from
// offset 0 at testBase.
const (
	testBase   = 0x400000
	testNote   = 0xb0
	testRodata = 0xd8 // "hello\x00", symbol "hello"
	testText   = 0xe0
)

var testBuildID = []byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
	0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14}

type testFunc struct {
	name  string
	code  []byte
	local bool
}

// testFuncs are laid out back to back from testText; opName must be first
// because its RIP displacement to "hello" depends on its address.
func testFuncs() []testFunc {
	next := int32(testText + len(iEndbr64) + len(iMovEDIEDI) + len(iLeaRIP) + 4)
	disp := binary.LittleEndian.AppendUint32(nil, uint32(testRodata-next))
	return []testFunc{
		{"op_name", asm(iEndbr64, iMovEDIEDI, iLeaRIP, disp, iRet), false},
		{"barrier", asm(iEndbr64, iMovEAX68, iMovzwlESI, iCmpAX1, iJe8, iRet), false},
		{"overhead", asm(iEndbr64, iMovEAX0x170, iRet), false},
		{"minus_one", asm([]byte{0xb8, 0xff, 0xff, 0xff, 0xff}, iRet), false},
		{"minus_one64", asm([]byte{0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff}, iRet), false},
		{"null", asm(iEndbr64, []byte{0x31, 0xc0}, iRet), false}, // xor %eax,%eax: Ollama's ggml_version
		{"dup", asm(iRet), true},
		{"dup", asm(iNop, iRet), false},
	}
}

// buildELF assembles a minimal x86-64 shared object with a GNU build id
// note, .rodata, .text holding funcs, and their symbols in .symtab, or
// only in .dynsym when stripped.
func buildELF(funcs []testFunc, stripped bool) []byte {
	le := binary.LittleEndian
	out := make([]byte, testText)
	note := le.AppendUint32(nil, 4)
	note = le.AppendUint32(note, uint32(len(testBuildID)))
	note = le.AppendUint32(note, ntGNUBuildID)
	note = append(append(note, "GNU\x00"...), testBuildID...)
	copy(out[testNote:], note)
	copy(out[testRodata:], "hello\x00")

	strtab := []byte("\x00hello\x00")
	syms := []elf.Sym64{{}, {Name: 1, Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_OBJECT), Shndx: 2, Value: testBase + testRodata, Size: 6}}
	for _, fn := range funcs {
		bind := elf.STB_GLOBAL
		if fn.local {
			bind = elf.STB_LOCAL
		}
		syms = append(syms, elf.Sym64{Name: uint32(len(strtab)), Info: elf.ST_INFO(bind, elf.STT_FUNC),
			Shndx: 3, Value: testBase + uint64(len(out)), Size: uint64(len(fn.code))})
		strtab = append(append(strtab, fn.name...), 0)
		out = append(out, fn.code...)
	}
	// Locals come first in a symbol table; Info holds the first global's index.
	isGlobal := func(s elf.Sym64) bool { return elf.ST_BIND(s.Info) != elf.STB_LOCAL }
	slices.SortStableFunc(syms, func(a, b elf.Sym64) int { return cmp.Compare(b2i(isGlobal(a)), b2i(isGlobal(b))) })
	firstGlobal := slices.IndexFunc(syms, isGlobal)
	textEnd := uint64(len(out))

	align8 := func() { out = append(out, make([]byte, -len(out)&7)...) }
	align8()
	symOff := uint64(len(out))
	out, _ = binary.Append(out, le, syms)
	strOff := uint64(len(out))
	out = append(out, strtab...)
	symName, strName, symType := ".symtab", ".strtab", elf.SHT_SYMTAB
	if stripped {
		symName, strName, symType = ".dynsym", ".dynstr", elf.SHT_DYNSYM
	}
	names := []string{"", ".note.gnu.build-id", ".rodata", ".text", symName, strName, ".shstrtab"}
	shstrOff := uint64(len(out))
	var shstrtab []byte
	nameOff := map[string]uint32{}
	for _, n := range names {
		nameOff[n] = uint32(len(shstrtab))
		shstrtab = append(append(shstrtab, n...), 0)
	}
	out = append(out, shstrtab...)
	align8()
	shOff := uint64(len(out))

	alloc := uint64(elf.SHF_ALLOC)
	sections := []elf.Section64{
		{},
		{Name: nameOff[names[1]], Type: uint32(elf.SHT_NOTE), Flags: alloc, Addr: testBase + testNote, Off: testNote, Size: uint64(len(note)), Addralign: 4},
		{Name: nameOff[names[2]], Type: uint32(elf.SHT_PROGBITS), Flags: alloc, Addr: testBase + testRodata, Off: testRodata, Size: 6, Addralign: 1},
		{Name: nameOff[names[3]], Type: uint32(elf.SHT_PROGBITS), Flags: alloc | uint64(elf.SHF_EXECINSTR), Addr: testBase + testText, Off: testText, Size: textEnd - testText, Addralign: 16},
		{Name: nameOff[names[4]], Type: uint32(symType), Off: symOff, Size: strOff - symOff, Link: 5, Info: uint32(firstGlobal), Addralign: 8, Entsize: elf.Sym64Size},
		{Name: nameOff[names[5]], Type: uint32(elf.SHT_STRTAB), Off: strOff, Size: uint64(len(strtab)), Addralign: 1},
		{Name: nameOff[names[6]], Type: uint32(elf.SHT_STRTAB), Off: shstrOff, Size: uint64(len(shstrtab)), Addralign: 1},
	}
	out, _ = binary.Append(out, le, sections)

	progs := []elf.Prog64{
		{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Vaddr: testBase, Paddr: testBase, Filesz: textEnd, Memsz: textEnd, Align: 0x1000},
		{Type: uint32(elf.PT_NOTE), Flags: uint32(elf.PF_R), Off: testNote, Vaddr: testBase + testNote, Paddr: testBase + testNote, Filesz: uint64(len(note)), Memsz: uint64(len(note)), Align: 4},
	}
	hdr := elf.Header64{
		Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Shoff: shOff, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)),
		Shentsize: 64, Shnum: uint16(len(sections)), Shstrndx: uint16(len(sections) - 1),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	head, _ := binary.Append(nil, le, hdr)
	head, _ = binary.Append(head, le, progs)
	copy(out, head)
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newTestFile(t *testing.T, stripped bool) *File {
	t.Helper()
	f, err := NewFile(bytes.NewReader(buildELF(testFuncs(), stripped)), "test.so")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustSymbol(t *testing.T, f *File, name string) Symbol {
	t.Helper()
	s, ok := f.Symbol(name)
	if !ok {
		t.Fatalf("symbol %s not found", name)
	}
	return s
}

func TestFile(t *testing.T) {
	for _, stripped := range []bool{false, true} {
		f := newTestFile(t, stripped)
		if got, want := f.BuildID(), hex.EncodeToString(testBuildID); got != want {
			t.Errorf("BuildID() = %q, want %q", got, want)
		}
		if got := mustSymbol(t, f, "hello"); got != (Symbol{"hello", testBase + testRodata, 6}) {
			t.Errorf("Symbol(hello) = %+v", got)
		}
		if got, want := f.Missing("zz", "barrier", "aa", "zz"), []string{"aa", "zz"}; !slices.Equal(got, want) {
			t.Errorf("Missing() = %q, want %q", got, want)
		}
		if got := f.Missing("barrier"); got != nil {
			t.Errorf("Missing(barrier) = %q, want nil", got)
		}
	}
}

func TestGlobalWinsOverLocal(t *testing.T) {
	f := newTestFile(t, false)
	dup := mustSymbol(t, f, "dup")
	if b, err := f.ReadAt(dup.Value, int(dup.Size)); err != nil || !bytes.Equal(b, asm(iNop, iRet)) {
		t.Errorf("Symbol(dup) is the local one: % x, %v", b, err)
	}
}

func TestReadAt(t *testing.T) {
	f := newTestFile(t, false)
	s, err := f.CString(testBase + testRodata)
	if err != nil || s != "hello" {
		t.Errorf("CString() = %q, %v", s, err)
	}
	if s, err := f.CString(testBase + testRodata + 5); err != nil || s != "" {
		t.Errorf("CString(at NUL) = %q, %v", s, err)
	}
	last := mustSymbol(t, f, "dup")
	if _, err := f.CString(last.Value); err == nil {
		t.Error("CString(no NUL before segment end) succeeded")
	}
	if b, err := f.ReadAt(last.Value, 100); err != nil || len(b) != int(last.Size) {
		t.Errorf("ReadAt(near segment end) = % x, %v; want %d bytes", b, err, last.Size)
	}
	if _, err := f.ReadAt(testBase-1, 1); err == nil || !strings.HasPrefix(err.Error(), "symbols: test.so: ") {
		t.Errorf("ReadAt(unmapped) error = %v", err)
	}
	if _, err := f.ReadAt(testBase, -1); err == nil {
		t.Error("ReadAt(n < 0) succeeded")
	}
}

func TestDecodeFunctions(t *testing.T) {
	f := newTestFile(t, true)
	if off, emul, err := f.ProbeOffset(mustSymbol(t, f, "barrier"), Arg1); off != 14 || !emul || err != nil {
		t.Errorf("ProbeOffset(barrier) = %d, %v, %v; want 14, true", off, emul, err)
	}
	if addr, err := f.PCRelTarget(mustSymbol(t, f, "op_name")); addr != testBase+testRodata || err != nil {
		t.Errorf("PCRelTarget(op_name) = %#x, %v; want %#x", addr, err, testBase+testRodata)
	}
	if _, err := f.PCRelTarget(mustSymbol(t, f, "barrier")); err == nil {
		t.Error("PCRelTarget(barrier) succeeded")
	}
	for name, want := range map[string]uint64{"overhead": 0x170, "minus_one": 0xffffffff, "minus_one64": ^uint64(0), "null": 0} {
		if got, err := f.ImmediateReturn(mustSymbol(t, f, name)); got != want || err != nil {
			t.Errorf("ImmediateReturn(%s) = %#x, %v; want %#x", name, got, err, want)
		}
	}
	if _, err := f.ImmediateReturn(mustSymbol(t, f, "op_name")); err == nil {
		t.Error("ImmediateReturn(op_name) succeeded")
	}
}

// Code of a machine profinfer does not decode is refused, naming the machine.
func TestUnknownMachine(t *testing.T) {
	data := buildELF(testFuncs(), false)
	binary.LittleEndian.PutUint16(data[18:], uint16(elf.EM_RISCV))
	f, err := NewFile(bytes.NewReader(data), "riscv.so")
	if err != nil {
		t.Fatal(err)
	}
	want := "symbols: riscv.so: barrier: machine EM_RISCV, want x86-64 or arm64"
	if _, _, err := f.ProbeOffset(mustSymbol(t, f, "barrier"), Arg1); err == nil || err.Error() != want {
		t.Errorf("ProbeOffset on RISC-V: %v, want %q", err, want)
	}
	if _, err := f.PCRelTarget(mustSymbol(t, f, "op_name")); err == nil || !strings.Contains(err.Error(), "machine EM_RISCV") {
		t.Errorf("PCRelTarget on RISC-V: %v", err)
	}
	if _, err := f.ImmediateReturn(mustSymbol(t, f, "overhead")); err == nil || !strings.Contains(err.Error(), "machine EM_RISCV") {
		t.Errorf("ImmediateReturn on RISC-V: %v", err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "test.so")
	if err := os.WriteFile(path, buildELF(testFuncs(), false), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustSymbol(t, f, "barrier")
	if err := f.Close(); err != nil {
		t.Error(err)
	}

	missing := filepath.Join(dir, "missing")
	if _, err := Open(missing); err == nil || !strings.HasPrefix(err.Error(), "symbols: open "+missing+": ") {
		t.Errorf("Open(missing) error = %v", err)
	}
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(text); err == nil || !strings.Contains(err.Error(), "not an ELF file") {
		t.Errorf("Open(text) error = %v", err)
	}
	if _, err := NewFile(bytes.NewReader(nil), "empty"); err == nil || !strings.Contains(err.Error(), "not an ELF file") {
		t.Errorf("NewFile(empty) error = %v", err)
	}
}

func TestFunctionClones(t *testing.T) {
	f := &File{syms: map[string]Symbol{}}
	for _, n := range []string{"exact", "exact.isra.0", "worker.isra.1", "worker.constprop.0", "split.cold", "split.part.x", "workers.isra.0"} {
		f.syms[n] = Symbol{Name: n}
	}
	for name, want := range map[string]string{"exact": "exact", "worker": "worker.constprop.0", "split": "", "work": ""} {
		s, ok := f.Function(name)
		if s.Name != want || ok != (want != "") {
			t.Errorf("Function(%q) = %q, %v; want %q", name, s.Name, ok, want)
		}
	}
}
