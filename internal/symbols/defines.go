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
	if f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("symbols: %s: not a 64-bit ELF file", path)
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
	for off := size; off+size <= len(syms); off += size {
		if binary.LittleEndian.Uint16(syms[off+6:]) == uint16(elf.SHN_UNDEF) { // st_shndx
			continue
		}
		name := uint32(binary.LittleEndian.Uint32(syms[off:])) // st_name
		if int(name) >= len(strs) {
			continue
		}
		n := strs[name:]
		if end := bytes.IndexByte(n, 0); end >= 0 {
			n = n[:end]
		}
		for i, want := range names {
			if string(n) == want {
				found[i] = true
			}
		}
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
