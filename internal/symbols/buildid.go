package symbols

import (
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"io"
)

// maxNotes bounds how much of a note section is read; a build id note is
// 36 bytes, and a corrupt size must not make us read a whole file.
const maxNotes = 1 << 16

// ntGNUBuildID is NT_GNU_BUILD_ID, which debug/elf does not define.
const ntGNUBuildID = 3

// buildID returns the NT_GNU_BUILD_ID note in hex, from the section when
// there are section headers, else from the PT_NOTE segments.
func buildID(ef *elf.File) string {
	if s := ef.Section(".note.gnu.build-id"); s != nil && s.Type == elf.SHT_NOTE {
		return gnuBuildID(s.Open(), s.Addralign, ef.ByteOrder)
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		if id := gnuBuildID(p.Open(), p.Align, ef.ByteOrder); id != "" {
			return id
		}
	}
	return ""
}

// gnuBuildID scans the notes in r. Notes are padded to 4 bytes, or to 8
// in 8-aligned containers (.note.gnu.property segments).
func gnuBuildID(r io.Reader, align uint64, order binary.ByteOrder) string {
	data, _ := io.ReadAll(io.LimitReader(r, maxNotes))
	if align != 8 {
		align = 4
	}
	pad := func(n uint64) uint64 { return (n + align - 1) &^ (align - 1) }
	for len(data) >= 12 {
		namesz, descsz := uint64(order.Uint32(data)), uint64(order.Uint32(data[4:]))
		typ := order.Uint32(data[8:])
		data = data[12:]
		descOff := pad(namesz)
		if descOff+descsz > uint64(len(data)) {
			return ""
		}
		if typ == ntGNUBuildID && string(data[:namesz]) == "GNU\x00" {
			return hex.EncodeToString(data[descOff : descOff+descsz])
		}
		next := descOff + pad(descsz)
		if next > uint64(len(data)) {
			return ""
		}
		data = data[next:]
	}
	return ""
}
