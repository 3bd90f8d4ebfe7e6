package ggml

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/profinfer/profinfer/internal/symbols"
)

// Build is the llama.cpp build a process runs, as llama.cpp's common library records it
// in the executable or library that links it (build-info.cpp).
type Build struct {
	Number int    // LLAMA_BUILD_NUMBER; 0: unknown
	Commit string // LLAMA_COMMIT; "": unknown
}

// The symbols of build-info.cpp: an int, and a pointer to the commit's string.
const (
	buildNumberSymbol = "LLAMA_BUILD_NUMBER"
	buildCommitSymbol = "LLAMA_COMMIT"
)

// maxBuildNumber bounds a build number: llama.cpp's releases are numbered in the
// thousands.
const maxBuildNumber = 1 << 24

// ReadBuild reads LLAMA_BUILD_NUMBER and LLAMA_COMMIT of f, loaded at bias in the process
// whose memory is mem: from memory, where the commit's pointer is relocated. A file
// without them (stripped, or no common library) gives the zero Build and no error; what
// llama.cpp writes for a build made outside git (0, "unknown") is unknown too. Values that
// are no build number or commit (printable, under 64 bytes: a full SHA-1 is 40) are an
// error, returned with what was read well.
func ReadBuild(f *symbols.File, mem io.ReaderAt, bias uint64) (Build, error) {
	var b Build
	num, ok := f.Symbol(buildNumberSymbol)
	if !ok {
		return b, nil
	}
	var buf [8]byte
	if _, err := mem.ReadAt(buf[:4], int64(num.Value+bias)); err != nil {
		return b, fmt.Errorf("ggml: reading %s of %s: %w", buildNumberSymbol, f.Path(), err)
	}
	n := int32(binary.LittleEndian.Uint32(buf[:4]))
	if n < 0 || n > maxBuildNumber {
		return b, fmt.Errorf("ggml: %s of %s reads %d: no build number", buildNumberSymbol, f.Path(), n)
	}
	b.Number = int(n)
	commit, ok := f.Symbol(buildCommitSymbol)
	if !ok {
		return b, nil
	}
	if _, err := mem.ReadAt(buf[:], int64(commit.Value+bias)); err != nil {
		return b, fmt.Errorf("ggml: reading %s of %s: %w", buildCommitSymbol, f.Path(), err)
	}
	p := binary.LittleEndian.Uint64(buf[:])
	if p == 0 {
		return b, fmt.Errorf("ggml: %s of %s is null", buildCommitSymbol, f.Path())
	}
	r := memReader{mem, bias}
	s, err := r.cstring(p)
	if (err != nil || !printable(s)) && bias != 0 {
		// Not relocated yet: the pointer is the string's link-time address, as the file
		// holds it (GNU ld writes the addend there, and RELR relies on it).
		s, err = r.cstring(p + bias)
	}
	switch {
	case err != nil || !printable(s):
		return b, fmt.Errorf("ggml: %s of %s points to no commit at %#x", buildCommitSymbol, f.Path(), p)
	case s != "unknown":
		b.Commit = s
	}
	return b, nil
}
