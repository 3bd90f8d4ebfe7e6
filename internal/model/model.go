// Package model describes the model a llama.cpp process has loaded, from the GGUF file it
// maps (or holds open, when loaded without mmap).
package model

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/gguf"
)

// Info is what the GGUF file says of the model.
type Info struct {
	Path          string // as the process sees it
	Name          string // general.name
	Architecture  string // general.architecture
	Parameters    uint64 // elements of all its tensors
	FileType      string // general.file_type, named as llama.cpp prints it
	ContextLength uint64 // <architecture>.context_length: the context it was trained for
}

// Find returns the first GGUF file process pid maps or has open: its path as the process
// sees it and as profinfer can open it (under root/PID/root). ok is false if there is none
// (yet: a server maps its model some time after it starts).
func Find(fs procfs.FS, root string, pid int) (path, host string, ok bool) {
	proc, err := fs.Proc(pid)
	if err != nil {
		return "", "", false
	}
	var paths []string
	if maps, err := proc.ProcMaps(); err == nil {
		for _, m := range maps {
			if m.Pathname != "" && m.Inode != 0 && !m.Perms.Execute {
				paths = append(paths, m.Pathname)
			}
		}
	}
	if targets, err := proc.FileDescriptorTargets(); err == nil {
		paths = append(paths, targets...)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] || !filepath.IsAbs(p) {
			continue
		}
		seen[p] = true
		host := filepath.Join(root, strconv.Itoa(pid), "root", p)
		if isGGUF(host) {
			return p, host, true
		}
	}
	return "", "", false
}

// Named returns the GGUF file process pid named (as a command line names it: relative to
// its working directory), as the process sees it and as profinfer can open it, if it is
// one.
func Named(root string, pid int, name string) (path, host string, ok bool) {
	dir := filepath.Join(root, strconv.Itoa(pid))
	path = name
	if !filepath.IsAbs(path) {
		cwd, err := os.Readlink(filepath.Join(dir, "cwd"))
		if err != nil {
			return "", "", false
		}
		path = filepath.Join(cwd, path)
	}
	host = filepath.Join(dir, "root", path)
	if !isGGUF(host) {
		return "", "", false
	}
	return path, host, true
}

func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, len(gguf.Magic))
	_, err = f.ReadAt(magic, 0)
	return err == nil && bytes.Equal(magic, []byte(gguf.Magic))
}

func read(f *os.File, path string) (Info, error) {
	g, err := gguf.ReadSkippingArrays(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return Info{}, fmt.Errorf("model: %s: %w", path, err)
	}
	info := Info{Path: path}
	kv := map[string]any{}
	for _, e := range g.KV {
		kv[e.Key] = e.Value
	}
	info.Name, _ = kv["general.name"].(string)
	info.Architecture, _ = kv["general.architecture"].(string)
	info.ContextLength = unsigned(kv[info.Architecture+".context_length"])
	if ft, ok := kv["general.file_type"]; ok {
		info.FileType = FileType(unsigned(ft))
	}
	for _, t := range g.Tensors {
		info.Parameters += t.Elements()
	}
	return info, nil
}

// Cache remembers what model files say, by file: a machine starts the same model many
// times (llama-bench a process per test), and each start is looked at while it computes.
// Safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	infos map[fileID]Info
}

// fileID tells a file from its replacement: a model rewritten in place changes size or
// modification time.
type fileID struct {
	dev, ino, size uint64
	mtime          int64
}

// maxCached bounds the cache; past it, it starts over.
const maxCached = 64

// Read describes the GGUF file at host; path is its name as the process sees it. A file
// read before is answered from the cache.
func (c *Cache) Read(host, path string) (Info, error) {
	f, err := os.Open(host)
	if err != nil {
		return Info{}, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return Info{}, fmt.Errorf("model: %s: %w", path, err)
	}
	id := fileID{dev: st.Dev, ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim.Nano()}
	c.mu.Lock()
	info, ok := c.infos[id]
	c.mu.Unlock()
	if ok {
		info.Path = path
		return info, nil
	}
	if info, err = read(f, path); err != nil {
		return info, err
	}
	c.mu.Lock()
	if c.infos == nil || len(c.infos) >= maxCached {
		c.infos = map[fileID]Info{}
	}
	c.infos[id] = info
	c.mu.Unlock()
	return info, nil
}

func unsigned(v any) uint64 {
	switch x := v.(type) {
	case uint32:
		return uint64(x)
	case uint64:
		return x
	case int32:
		return uint64(max(x, 0))
	case int64:
		return uint64(max(x, 0))
	}
	return 0
}

// fileTypes are llama.cpp's names of enum llama_ftype (llama_ftype_name).
var fileTypes = map[uint64]string{
	0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K - Medium", 11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large",
	14: "Q4_K - Small", 15: "Q4_K - Medium", 16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K",
	19: "IQ2_XXS - 2.0625 bpw", 20: "IQ2_XS - 2.3125 bpw", 21: "Q2_K - Small", 22: "IQ3_XS - 3.3 bpw",
	23: "IQ3_XXS - 3.0625 bpw", 24: "IQ1_S - 1.5625 bpw", 25: "IQ4_NL - 4.5 bpw", 26: "IQ3_S - 3.4375 bpw",
	27: "IQ3_S mix - 3.66 bpw", 28: "IQ2_S - 2.5 bpw", 29: "IQ2_M - 2.7 bpw", 30: "IQ4_XS - 4.25 bpw",
	31: "IQ1_M - 1.75 bpw", 32: "BF16", 36: "TQ1_0 - 1.69 bpw ternary", 37: "TQ2_0 - 2.06 bpw ternary",
	38: "MXFP4 MoE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}

// FileType names a general.file_type value as llama.cpp prints it.
func FileType(v uint64) string {
	if n, ok := fileTypes[v]; ok {
		return n
	}
	return fmt.Sprintf("unknown (%d)", v)
}

// Whisper is what a whisper.cpp model's hyperparameters say of it, as its loaded
// whisper_context holds them: whisper's models are not GGUF files.
type Whisper struct {
	Type                                       string // tiny, base, small, medium, large, or unknown
	Vocab, AudioCtx, AudioState, AudioHeads    int
	AudioLayers, TextCtx, TextState, TextHeads int
	TextLayers, Mels                           int
	FileType                                   string // named as llama.cpp names general.file_type
}
