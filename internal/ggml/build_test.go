package ggml_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/symbols"
	"github.com/profinfer/profinfer/internal/testbench"
)

// image is an object's memory as the loader maps it at bias: its PT_LOAD segments, zero
// past their file contents. Unrelocated: its pointers hold the link-time addresses that
// GNU ld writes into the file, until relocate.
type image struct {
	path  string
	data  []byte
	progs []elf.ProgHeader
	bias  uint64
}

func newImage(t *testing.T, path string) *image {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		testbench.Missing(t, err.Error())
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	m := &image{path: path, data: data}
	for _, p := range ef.Progs {
		m.progs = append(m.progs, p.ProgHeader)
	}
	if ef.Type == elf.ET_DYN { // loaded anywhere: not where it was linked
		m.bias = 0x7f1200000000
	}
	return m
}

// file parses the image's object as it is now.
func (m *image) file(t *testing.T) *symbols.File {
	t.Helper()
	f, err := symbols.NewFile(bytes.NewReader(m.data), m.path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (m *image) ReadAt(b []byte, off int64) (int, error) {
	addr := uint64(off) - m.bias
	for _, p := range m.progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr-p.Vaddr >= p.Memsz {
			continue
		}
		in := addr - p.Vaddr
		n := min(uint64(len(b)), p.Memsz-in)
		clear(b[:n])
		if in < p.Filesz {
			copy(b[:n], m.data[p.Off+in:p.Off+min(p.Filesz, in+n)])
		}
		if int(n) < len(b) {
			return int(n), io.EOF
		}
		return int(n), nil
	}
	return 0, fmt.Errorf("%#x is not mapped", off)
}

// at is where the file holds link-time address addr.
func (m *image) at(t *testing.T, addr uint64) []byte {
	t.Helper()
	for _, p := range m.progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			return m.data[p.Off+addr-p.Vaddr : p.Off+p.Filesz]
		}
	}
	t.Fatalf("%s: %#x is not in the file", m.path, addr)
	return nil
}

// symbol is the link-time address of name in the image's object.
func (m *image) symbol(t *testing.T, name string) uint64 {
	t.Helper()
	s, ok := m.file(t).Symbol(name)
	if !ok {
		t.Fatalf("%s has no %s", m.path, name)
	}
	return s.Value
}

// relocate has the commit's pointer relocated, as the loader does.
func (m *image) relocate(t *testing.T) {
	t.Helper()
	slot := m.at(t, m.symbol(t, "LLAMA_COMMIT"))
	binary.LittleEndian.PutUint64(slot, binary.LittleEndian.Uint64(slot)+m.bias)
}

// version is the build that llama.cpp tool exe says it is (--version).
func version(t *testing.T, exe string) ggml.Build {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, exe, "--version").CombinedOutput()
	m := regexp.MustCompile(`version: .* \(build (\d+), commit (\w+)\)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version: %s", exe, out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return ggml.Build{Number: n, Commit: string(m[2])}
}

// LLAMA_BUILD_NUMBER and LLAMA_COMMIT as each test bench build says it is: the executables
// that link llama.cpp's common library, the library itself, node-llama-cpp's addon or
// common library, Ollama's runner and its Go engine; before the loader relocated the
// commit's pointer and after.
func TestReadBuild(t *testing.T) {
	e := testbench.Require(t)
	current := version(t, e.Bin("llama-server"))
	ollamaRunner := filepath.Join(e.Root, "ollama", "lib", "ollama", "llama-server")
	for _, c := range []struct {
		path string
		want ggml.Build
	}{
		{e.Bin("llama-server"), current},
		{e.Bin("llama-bench"), version(t, e.Bin("llama-bench"))},
		// The common library, whose definitions the executables' own interpose on.
		{e.Bin("libllama-common.so"), current},
		// Static, not PIE: no bias, and the commit's pointer absolute in the file.
		{e.Portable("llama-server"), version(t, e.Portable("llama-server"))},
		{ollamaRunner, version(t, ollamaRunner)},
		// Without --version: what llama-bench -o json prints as build_number and build_commit.
		{e.OldStatic("b3889"), ggml.Build{Number: 1, Commit: "a004b08"}},
		{e.OldStatic("b4234"), ggml.Build{Number: 1, Commit: "274825e"}},
		// Ollama's vendored llama.cpp leaves LLAMA_BUILD_NUMBER 0, in .bss: unknown.
		{e.OllamaOldExe(), ggml.Build{Commit: "ec98e2002"}},
		// node-llama-cpp's: in its addon, then in libllama-common; x64 and arm64.
		{filepath.Join(e.OldPrebuiltDir("3.1.1"), "llama-addon.node"), ggml.Build{Number: 1, Commit: "8145c94"}},
		{filepath.Join(e.OldPrebuiltDir("3.20.0"), "libllama-common.so"), ggml.Build{Number: 1, Commit: "adb92f2"}},
		{filepath.Join(e.PrebuiltDir(), "libllama-common.so"), ggml.Build{Number: 1, Commit: "0ad4a86"}},
		{filepath.Join(e.ARM64PrebuiltDir(), "libllama-common.so"), ggml.Build{Number: 1, Commit: "0ad4a86"}},
		{e.Bin("libllama.so"), ggml.Build{}}, // records no build
	} {
		m := newImage(t, c.path)
		f := m.file(t)
		if b, err := ggml.ReadBuild(f, m, m.bias); err != nil || b != c.want {
			t.Errorf("%s, unrelocated: %+v, %v; want %+v", c.path, b, err, c.want)
		}
		if c.want.Commit == "" || m.bias == 0 {
			continue
		}
		m.relocate(t)
		if b, err := ggml.ReadBuild(f, m, m.bias); err != nil || b != c.want {
			t.Errorf("%s, relocated: %+v, %v; want %+v", c.path, b, err, c.want)
		}
	}
}

// A build stripped of its symbol table records no build, without an error; garbage
// where the build number or commit is gives an error, and the rest read well; what
// llama.cpp writes outside git is unknown.
func TestReadBuildCorrupt(t *testing.T) {
	e := testbench.Require(t)
	// strip: the static llama-server keeps its symbols in .symtab alone.
	static := newImage(t, e.Portable("llama-server"))
	ef, err := elf.NewFile(bytes.NewReader(static.data))
	if err != nil {
		t.Fatal(err)
	}
	shoff := binary.LittleEndian.Uint64(static.data[0x28:]) // e_shoff; each Elf64_Shdr 64 bytes, sh_type at 4
	for i, s := range ef.Sections {
		if s.Type == elf.SHT_SYMTAB {
			binary.LittleEndian.PutUint32(static.data[shoff+uint64(i*64)+4:], uint32(elf.SHT_NULL))
		}
	}
	if b, err := ggml.ReadBuild(static.file(t), static, 0); err != nil || b != (ggml.Build{}) {
		t.Errorf("stripped: %+v, %v; want nothing, no error", b, err)
	}

	want := version(t, e.Bin("llama-server"))
	for _, c := range []struct {
		name    string
		corrupt func(m *image)
		want    ggml.Build
		err     string
	}{
		{"a negative build number", func(m *image) {
			binary.LittleEndian.PutUint32(m.at(t, m.symbol(t, "LLAMA_BUILD_NUMBER")), 0xfffffffb)
		}, ggml.Build{}, "LLAMA_BUILD_NUMBER of .* reads -5: no build number"},
		{"a null commit", func(m *image) {
			binary.LittleEndian.PutUint64(m.at(t, m.symbol(t, "LLAMA_COMMIT")), 0)
		}, ggml.Build{Number: want.Number}, "LLAMA_COMMIT of .* is null"},
		{"a commit pointing at code", func(m *image) {
			binary.LittleEndian.PutUint64(m.at(t, m.symbol(t, "LLAMA_COMMIT")), m.symbol(t, "main")+m.bias)
		}, ggml.Build{Number: want.Number}, "LLAMA_COMMIT of .* points to no commit"},
		{"a commit that does not end", func(m *image) {
			s := m.at(t, binary.LittleEndian.Uint64(m.at(t, m.symbol(t, "LLAMA_COMMIT"))))
			copy(s, bytes.Repeat([]byte{'a'}, 200))
		}, ggml.Build{Number: want.Number}, "LLAMA_COMMIT of .* points to no commit"},
		{"a build made outside git", func(m *image) {
			binary.LittleEndian.PutUint32(m.at(t, m.symbol(t, "LLAMA_BUILD_NUMBER")), 0)
			copy(m.at(t, binary.LittleEndian.Uint64(m.at(t, m.symbol(t, "LLAMA_COMMIT")))), "unknown\x00")
		}, ggml.Build{}, ""},
	} {
		m := newImage(t, e.Bin("llama-server"))
		c.corrupt(m)
		b, err := ggml.ReadBuild(m.file(t), m, m.bias)
		if b != c.want || (c.err == "") != (err == nil) || err != nil && !regexp.MustCompile(c.err).MatchString(err.Error()) {
			t.Errorf("%s: %+v, %v; want %+v, %q", c.name, b, err, c.want, c.err)
		}
	}
	// A process whose memory cannot be read there.
	m := newImage(t, e.Bin("llama-server"))
	if _, err := ggml.ReadBuild(m.file(t), m, m.bias+1<<40); err == nil {
		t.Error("unmapped memory: no error")
	}
}

// llama_context's fields are found from libllama's getters in every test bench build that
// has them, n_batch and n_ubatch with n_ctx and n_threads, and n_ctx_seq and n_seq_max
// from b8352 on (before, n_ctx_per_seq computes its value); the offsets are those of the
// getters' disassembly. Releases before the getters have none, as before.
func TestContextFromBenchBuilds(t *testing.T) {
	e := testbench.Require(t)
	lib := func(dir string) string {
		libs, _ := filepath.Glob(filepath.Join(dir, "libllama.*so"))
		if len(libs) != 1 {
			testbench.Missing(t, "libllama in "+dir)
		}
		return libs[0]
	}
	current := ggml.Context{NCtx: 0x8, NThreads: 0x28, NBatch: 0x10, NUbatch: 0x14, Batches: true, NCtxSeq: 0xc, NSeqMax: 0x18, Seqs: true}
	for _, c := range []struct {
		path string
		want ggml.Context // zero: no getters
	}{
		{e.Bin("libllama.so"), current},
		{e.Portable("llama-bench"), current},
		{filepath.Join(e.Root, "ollama", "lib", "ollama", "libllama.so"), current},
		{e.OllamaOldExe(), ggml.Context{NCtx: 0x8, NThreads: 0x1c, NBatch: 0x10, NUbatch: 0x14, Batches: true, NCtxSeq: 0xc, NSeqMax: 0x18, Seqs: true}},
		{lib(e.OldPrebuiltDir("3.10.0")), ggml.Context{NCtx: 0x8, NThreads: 0x18, NBatch: 0xc, NUbatch: 0x10, Batches: true}},
		{lib(e.OldPrebuiltDir("3.12.0")), ggml.Context{NCtx: 0x8, NThreads: 0x18, NBatch: 0xc, NUbatch: 0x10, Batches: true}},
		{lib(e.OldPrebuiltDir("3.14.0")), ggml.Context{NCtx: 0x8, NThreads: 0x18, NBatch: 0xc, NUbatch: 0x10, Batches: true}},
		{lib(e.OldPrebuiltDir("3.18.0")), ggml.Context{NCtx: 0x8, NThreads: 0x1c, NBatch: 0x10, NUbatch: 0x14, Batches: true, NCtxSeq: 0xc, NSeqMax: 0x18, Seqs: true}},
		{lib(e.OldPrebuiltDir("3.20.0")), current},
		{lib(e.PrebuiltDir()), current},
		{lib(e.ARM64PrebuiltDir()), current},
		{lib(e.OldPrebuiltDir("3.6.0")), ggml.Context{}},
		{lib(e.OldPrebuiltDir("3.3.0")), ggml.Context{}},
		{lib(e.OldPrebuiltDir("3.1.1")), ggml.Context{}},
		{e.OldStatic("b4234"), ggml.Context{}},
		{e.OldStatic("b3889"), ggml.Context{}},
	} {
		f := newImage(t, c.path).file(t)
		got, err := ggml.ContextIn(f)
		if got != c.want || (err == nil) != (c.want != ggml.Context{}) {
			t.Errorf("%s: %+v, %v; want %+v", c.path, got, err, c.want)
		}
	}
}

// Where n_batch's or n_ubatch's getter is missing, or no plain load, the batch sizes are
// unknown and n_ctx and n_threads read as before.
func TestContextWithoutBatchGetters(t *testing.T) {
	e := testbench.Require(t)
	want := ggml.Context{NCtx: 0x8, NThreads: 0x28, NCtxSeq: 0xc, NSeqMax: 0x18, Seqs: true}
	m := newImage(t, e.Bin("libllama.so"))
	renamed := bytes.ReplaceAll(m.data, []byte("_ZNK13llama_context7n_batchEv"), []byte("_ZNK13llama_context7n_batchEX"))
	f, err := symbols.NewFile(bytes.NewReader(renamed), m.path)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ggml.ContextIn(f); err != nil || c != want {
		t.Errorf("without n_batch's getter: %+v, %v; want %+v", c, err, want)
	}
	copy(m.at(t, m.symbol(t, "_ZNK13llama_context8n_ubatchEv")), []byte{0x31, 0xc0, 0xc3}) // xor %eax,%eax; ret
	if c, err := ggml.ContextIn(m.file(t)); err != nil || c != want {
		t.Errorf("n_ubatch's getter returning 0: %+v, %v; want %+v", c, err, want)
	}
}
