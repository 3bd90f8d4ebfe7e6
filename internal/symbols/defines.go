package symbols

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// Defines reports which of names the ELF file at path defines. It scans the raw symbol
// tables in place instead of parsing them: discovery asks this of every object every
// new process maps, libc and a runtime's own multi-megabyte tables included.
func Defines(path string, names []string) ([]bool, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("symbols: %w", err)
	}
	defer osf.Close()
	return defines(osf, path, names)
}

func defines(r io.ReaderAt, path string, names []string) ([]bool, error) {
	f, err := newELF(r, path)
	if err != nil {
		return nil, err
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, fmt.Errorf("symbols: %s: not a 64-bit little-endian ELF file", path)
	}
	found := make([]bool, len(names))
	for _, tab := range [...]elf.SectionType{elf.SHT_DYNSYM, elf.SHT_SYMTAB} {
		if err := scan(f, tab, names, found); err != nil {
			return nil, fmt.Errorf("symbols: %s: %w", path, err)
		}
	}
	return found, nil
}

// scan marks in found the names that the first symbol table of type typ defines.
func scan(f *elf.File, typ elf.SectionType, names []string, found []bool) error {
	return eachSymbol(f, typ, func(e entry, strtab []byte) {
		if e.shndx == uint16(elf.SHN_UNDEF) {
			return
		}
		n := e.name(strtab)
		for i, want := range names {
			if string(n) == want {
				found[i] = true
			}
		}
	})
}

// entry is an Elf64_Sym as it lies in its table.
type entry struct {
	nameOff     uint32 // st_name, into the table's string table
	info        byte   // st_info
	shndx       uint16 // st_shndx
	value, size uint64
}

// name is the entry's name in string table strtab, read in place; empty if it lies
// outside the table.
func (e entry) name(strtab []byte) []byte {
	if int(e.nameOff) >= len(strtab) {
		return nil
	}
	n := strtab[e.nameOff:]
	if end := bytes.IndexByte(n, 0); end >= 0 {
		n = n[:end]
	}
	return n
}

// eachSymbol calls fn with every entry of the first symbol table of type typ but the
// null first one, and the table's string table. A 64-bit little-endian file's only, as
// its callers check: the raw table is read in place rather than decoded symbol by symbol.
func eachSymbol(f *elf.File, typ elf.SectionType, fn func(e entry, strtab []byte)) error {
	s := f.SectionByType(typ)
	if s == nil || s.Link >= uint32(len(f.Sections)) {
		return nil
	}
	syms, err := s.Data()
	if err != nil {
		return err
	}
	strs, err := f.Sections[s.Link].Data()
	if err != nil {
		return err
	}
	const size = 24 // sizeof(Elf64_Sym)
	le := binary.LittleEndian
	for off := size; off+size <= len(syms); off += size {
		fn(entry{
			nameOff: le.Uint32(syms[off:]),
			info:    syms[off+4],
			shndx:   le.Uint16(syms[off+6:]),
			value:   le.Uint64(syms[off+8:]),
			size:    le.Uint64(syms[off+16:]),
		}, strs)
	}
	return nil
}

// ggmlMark is in every GGML build's read-only data: GGML_ASSERT's message.
var ggmlMark = []byte("GGML_ASSERT(%s) failed")

// StrippedGGML says whether the ELF file at path is a GGML build stripped of its symbol
// table: it has no .symtab, and its read-only data holds GGML's assertion message. Such a
// file (a static executable: a shared library keeps GGML's API in .dynsym) defines none
// of the functions profinfer probes as far as any tool can tell.
func StrippedGGML(path string) bool {
	osf, err := os.Open(path)
	if err != nil {
		return false
	}
	defer osf.Close()
	f, err := newELF(osf, path)
	if err != nil || f.SectionByType(elf.SHT_SYMTAB) != nil {
		return false
	}
	ro := f.Section(".rodata")
	if ro == nil || ro.Type == elf.SHT_NOBITS {
		return false
	}
	data, err := ro.Data()
	return err == nil && bytes.Contains(data, ggmlMark)
}
