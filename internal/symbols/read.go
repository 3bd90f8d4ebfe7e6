package symbols

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
)

// maxCString bounds CString, including the terminating NUL.
const maxCString = 256

// ReadAt returns up to n bytes of file content at virtual address addr,
// fewer where the containing segment or section ends.
func (f *File) ReadAt(addr uint64, n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("symbols: %s: negative length %d at %#x", f.name, n, addr)
	}
	r, avail, ok := f.locate(addr)
	if !ok {
		return nil, fmt.Errorf("symbols: %s: address %#x is not in the file", f.name, addr)
	}
	buf := make([]byte, min(uint64(n), avail))
	got, err := r.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && got > 0) {
		return nil, fmt.Errorf("symbols: %s: read at %#x: %w", f.name, addr, err)
	}
	return buf[:got], nil
}

// FileOffset returns where in the file the code at link-time address addr lies: what a
// uprobe is placed by. Only executable PT_LOAD segments hold code.
func (f *File) FileOffset(addr uint64) (uint64, error) {
	for _, p := range f.elf.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("symbols: %s: address %#x is in no executable segment", f.name, addr)
}

// locate finds the file content at addr: the PT_LOAD segment holding it,
// or for objects without program headers the allocated section.
func (f *File) locate(addr uint64) (r io.ReaderAt, avail uint64, ok bool) {
	for _, p := range f.elf.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := addr - p.Vaddr
			return io.NewSectionReader(p, int64(off), int64(p.Filesz-off)), p.Filesz - off, true
		}
	}
	for _, s := range f.elf.Sections {
		// Compressed sections have no ReaderAt; loaded ones never are.
		if s.Flags&elf.SHF_ALLOC != 0 && s.Flags&elf.SHF_COMPRESSED == 0 && s.Type != elf.SHT_NOBITS &&
			addr >= s.Addr && addr-s.Addr < s.Size {
			off := addr - s.Addr
			return io.NewSectionReader(s, int64(off), int64(s.Size-off)), s.Size - off, true
		}
	}
	return nil, 0, false
}

// CString reads a NUL-terminated string at virtual address addr.
func (f *File) CString(addr uint64) (string, error) {
	b, err := f.ReadAt(addr, maxCString)
	if err != nil {
		return "", err
	}
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", fmt.Errorf("symbols: %s: no NUL within %d bytes at %#x", f.name, len(b), addr)
	}
	return string(b[:i]), nil
}
