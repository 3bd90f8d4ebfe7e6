// Package symbols reads ELF symbols and code of x86-64 and arm64 executables and
// shared libraries, and picks uprobe sites that the kernel emulates instead
// of single-stepping.
package symbols

import (
	"bytes"
	"cmp"
	"debug/elf"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// File is an opened ELF object.
type File struct {
	name    string
	elf     *elf.File
	closer  io.Closer
	syms    map[string]Symbol
	buildID string
	byAddr  func() []Symbol // sized symbols sorted by address, built on first use
}

// Symbol is a defined function or object.
type Symbol struct {
	Name  string
	Value uint64 // virtual address
	Size  uint64
}

// Open opens the ELF file at path.
func Open(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("symbols: %w", err)
	}
	f, err := NewFile(osf, path)
	if err != nil {
		osf.Close()
		return nil, err
	}
	f.closer = osf
	return f, nil
}

// NewFile reads an ELF object from r; name is used in errors only.
func NewFile(r io.ReaderAt, name string) (*File, error) {
	ef, err := newELF(r, name)
	if err != nil {
		return nil, err
	}
	if ef.Class != elf.ELFCLASS64 || ef.Data != elf.ELFDATA2LSB {
		return nil, fmt.Errorf("symbols: %s: not a 64-bit little-endian ELF file", name)
	}
	// Sized for the larger table, so that it does not grow as it fills; a corrupt
	// header's size cannot make it large.
	n := 0
	for _, typ := range [...]elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		if s := ef.SectionByType(typ); s != nil {
			n = max(n, int(min(s.Size/24, 1<<16)))
		}
	}
	f := &File{name: name, elf: ef, syms: make(map[string]Symbol, n)}
	f.byAddr = sync.OnceValue(f.sortByAddr)
	// .symtab first: it also has the local symbols (static tables such as
	// GGML_OP_NAME) that .dynsym lacks.
	for _, typ := range [...]elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		if err := f.add(typ); err != nil {
			return nil, fmt.Errorf("symbols: %s: %w", name, err)
		}
	}
	f.buildID = buildID(ef)
	return f, nil
}

// newELF parses the ELF headers of r. debug/elf reports "bad magic number"; this says
// plainly what is wrong.
func newELF(r io.ReaderAt, name string) (*elf.File, error) {
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := r.ReadAt(magic, 0); err != nil || !bytes.Equal(magic, []byte(elf.ELFMAG)) {
		return nil, fmt.Errorf("symbols: %s: not an ELF file", name)
	}
	ef, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("symbols: %s: %w", name, err)
	}
	return ef, nil
}

// add records the defined symbols of the file's symbol table of type typ that were not
// seen yet. Among duplicates in one table (static functions of the same name in several
// objects) a global definition wins over local ones. It reads the table in place and
// keeps the names as slices of one copy of its string table: a library's tens of
// thousands of symbols are then a few allocations, not one each, for the collector's
// garbage collector to chase on the cores the model runs on.
func (f *File) add(typ elf.SectionType) error {
	var strs string            // the string table, copied once when a name is kept
	local := map[string]bool{} // the entry came from a local symbol of this table
	return eachSymbol(f.elf, typ, func(e entry, strtab []byte) {
		kind := elf.ST_TYPE(e.info)
		if e.shndx == uint16(elf.SHN_UNDEF) || kind == elf.STT_SECTION || kind == elf.STT_FILE {
			return
		}
		n := e.name(strtab)
		if len(n) == 0 {
			return
		}
		isLocal := elf.ST_BIND(e.info) == elf.STB_LOCAL
		if old, had := f.syms[string(n)]; had {
			if isLocal || !local[old.Name] {
				return
			}
		}
		if strs == "" {
			strs = string(strtab)
		}
		name := strs[e.nameOff : e.nameOff+uint32(len(n))]
		if isLocal {
			local[name] = true
		} else {
			delete(local, name)
		}
		f.syms[name] = Symbol{Name: name, Value: e.value, Size: e.size}
	})
}

func (f *File) sortByAddr() []Symbol {
	var syms []Symbol
	for _, s := range f.syms {
		if s.Size > 0 {
			syms = append(syms, s)
		}
	}
	slices.SortFunc(syms, func(a, b Symbol) int { return cmp.Compare(a.Value, b.Value) })
	return syms
}

// At returns the symbol whose extent holds the link-time address addr.
func (f *File) At(addr uint64) (Symbol, bool) {
	syms := f.byAddr()
	// i: the first symbol above addr. Differences, not sums: a corrupt file's extents
	// may run past the top of the address space.
	i, _ := slices.BinarySearchFunc(syms, addr, func(s Symbol, a uint64) int {
		if s.Value <= a {
			return -1
		}
		return 1
	})
	if i == 0 || addr-syms[i-1].Value >= syms[i-1].Size {
		return Symbol{}, false
	}
	return syms[i-1], true
}

// Close closes the underlying file if Open opened it.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// BuildID returns the GNU build id in hex, or "" if the file has none.
func (f *File) BuildID() string { return f.buildID }

// Symbol looks a defined symbol up by exact name in .symtab, then .dynsym.
func (f *File) Symbol(name string) (Symbol, bool) {
	s, ok := f.syms[name]
	return s, ok
}

// Names yields the name of every defined symbol, in no order.
func (f *File) Names() iter.Seq[string] { return maps.Keys(f.syms) }

// Function looks a function up by name, or else a clone of it that the compiler made
// (name.isra.0, name.constprop.0, name.part.0), as static functions often become.
func (f *File) Function(name string) (Symbol, bool) {
	if s, ok := f.syms[name]; ok {
		return s, true
	}
	var best Symbol
	for n, s := range f.syms {
		suffix, ok := strings.CutPrefix(n, name+".")
		if ok && isClone(suffix) && (best.Name == "" || n < best.Name) {
			best = s
		}
	}
	return best, best.Name != ""
}

// isClone says whether suffix, as in name.<suffix>, is one of GCC's clone suffixes with
// its number: the clone is a callable entry, unlike name.cold.
func isClone(suffix string) bool {
	for _, kind := range []string{"isra.", "constprop.", "part."} {
		if n, ok := strings.CutPrefix(suffix, kind); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

// Missing returns the sorted names from want that are not defined.
func (f *File) Missing(want ...string) []string {
	var missing []string
	for _, name := range want {
		if _, ok := f.syms[name]; !ok {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}
