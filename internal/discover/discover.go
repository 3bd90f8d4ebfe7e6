// Package discover finds the processes that run GGML and the objects in each that hold
// its code: libggml-base, the CPU backend (a shared library, one of the dlopen'ed
// microarchitecture variants, or a static executable) and libllama.
package discover

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Role is what a mapped object provides.
type Role int

// Roles, each identified by a symbol the object defines.
const (
	Base         Role = iota // ggml_tensor_overhead: names, layout
	CPU                      // ggml_graph_compute: the CPU backend, node and graph probes
	Llama                    // llama_decode: token probes
	Whisper                  // whisper_full_with_state: whisper.cpp's transcriptions
	OllamaEngine             // Ollama's own Go engine (before 0.30), which computes through cgo
	numRoles
	// Build defines llama.cpp's build number and commit (LLAMA_BUILD_NUMBER): an
	// executable or library that links llama.cpp's common library. It has no code to
	// probe, so Process.Build keeps it, not Modules.
	Build = numRoles
)

// RoleSymbol is the symbol that identifies each role, exported in every release
// (ggml_version only from mid-2025 on).
var RoleSymbol = [numRoles]string{"ggml_tensor_overhead", "ggml_graph_compute", "llama_decode",
	"whisper_full_with_state", OllamaEngineSymbol}

// Classified are the symbols a Classifier looks for: RoleSymbol's, then Build's.
var Classified = append(RoleSymbol[:], "LLAMA_BUILD_NUMBER")

// OllamaEngineSymbol is the Go function through which Ollama's own engine computes a
// batch's graph.
const OllamaEngineSymbol = "github.com/ollama/ollama/ml/backend/ggml.(*Context).Compute"

func (r Role) String() string {
	return [...]string{"ggml-base", "ggml-cpu", "llama", "whisper", "ollama-engine", "llama-build"}[r]
}

// Module is one mapped object file of a process.
type Module struct {
	Path     string // as the process sees it, in its own mount namespace
	HostPath string // the same file, reachable from profinfer: /proc/PID/root/…
	Bias     uint64 // run-time minus link-time address
	Dev      uint64
	Inode    uint64
}

// Process is a process that maps GGML code.
type Process struct {
	PID     int
	VPID    int // the PID inside the process's own PID namespace
	Exe     string
	Modules [numRoles]*Module
	// Backends are the GGML backends besides the CPU's that it loaded as libraries of
	// their own (libggml-vulkan.so: "vulkan"), whether or not they found a device;
	// Libraries holds each one's library.
	Backends  []string
	Libraries map[string]*Module
	// Build is the object that records llama.cpp's build: the first mapped that defines
	// it, so the executable where it does, whose copy the loader binds the libraries to.
	Build *Module
}

// Module returns the object that plays role r, if any.
func (p *Process) Module(r Role) *Module { return p.Modules[r] }

// Classifier tells which roles (Build among them) an object file plays. It is given the
// file identity, so that it can answer from a cache by identity, and the host path to open
// it by, made only when it is called for.
type Classifier func(dev, inode uint64, hostPath func() string) ([]Role, error)

// Inspect reads /proc/PID/maps and classifies each executable mapping. It returns nil
// and no error for a process that maps no GGML CPU backend.
func Inspect(fs procfs.FS, root string, pid int, classify Classifier) (*Process, error) {
	proc, err := fs.Proc(pid)
	if err != nil {
		return nil, err
	}
	maps, err := proc.ProcMaps()
	if err != nil {
		return nil, fmt.Errorf("discover: reading maps of pid %d: %w", pid, err)
	}
	exe, _ := Executable(proc)
	p := &Process{PID: pid, VPID: nsPID(root, pid), Exe: exe}
	// The lowest mapping of each file gives its load address.
	lowest := map[string]*procfs.ProcMap{}
	for _, m := range maps {
		if m.Pathname == "" || strings.HasPrefix(m.Pathname, "[") || m.Inode == 0 {
			continue
		}
		if l, ok := lowest[m.Pathname]; !ok || m.StartAddr < l.StartAddr {
			lowest[m.Pathname] = m
		}
	}
	for _, m := range maps {
		if !m.Perms.Execute || m.Pathname == "" || m.Inode == 0 {
			continue
		}
		path := Path(m)
		dev := uint64(m.Dev)
		var host string
		hostPath := func() string {
			if host == "" {
				host = Host(root, pid, m)
			}
			return host
		}
		module := func() *Module {
			low := lowest[m.Pathname]
			return &Module{Path: path, HostPath: hostPath(), Dev: dev, Inode: m.Inode,
				Bias: uint64(low.StartAddr) - uint64(low.Offset) - LinkBase(hostPath())}
		}
		if b := backendLibrary(path); b != "" && !slices.Contains(p.Backends, b) {
			p.Backends = append(p.Backends, b)
			if p.Libraries == nil {
				p.Libraries = map[string]*Module{}
			}
			p.Libraries[b] = module()
		}
		// Every object is looked at, whatever its name: a binding links GGML into an
		// addon of its own (a Node.js index.node, a Python extension). Each file is read
		// once, and known by its identity after.
		roles, err := classify(dev, m.Inode, hostPath)
		if err != nil {
			continue // not ELF, or unreadable: not ours
		}
		if len(roles) == 0 {
			continue
		}
		mod := module()
		for _, r := range roles {
			switch {
			case r == Build:
				if p.Build == nil {
					p.Build = mod
				}
			case p.Modules[r] == nil:
				p.Modules[r] = mod
			}
		}
	}
	// A base without a CPU backend is GGML still: a CPU backend inside it that profinfer
	// cannot probe, or one a binding loads later with dlopen. The caller tells which.
	if p.Modules[CPU] == nil && p.Modules[Base] == nil {
		return nil, nil
	}
	return p, nil
}

// deleted is what the kernel appends to the path of a mapped or executed file that was
// removed or replaced on disk since.
const deleted = " (deleted)"

// Path returns the path of the file mapping m maps, as its process sees it.
func Path(m *procfs.ProcMap) string { return strings.TrimSuffix(m.Pathname, deleted) }

// Host returns a path that reaches the very file mapping m of process pid maps, from
// profinfer (for ELF reads and uprobes, which follow the link): under /proc/PID/root
// while the path still names the mapped file, else through /proc/PID/map_files. The
// latter covers a binary replaced or deleted on disk while the process runs, and a root
// that shows the file with another identity.
func Host(root string, pid int, m *procfs.ProcMap) string {
	dir := filepath.Join(root, strconv.Itoa(pid))
	host := filepath.Join(dir, "root", m.Pathname)
	var st unix.Stat_t
	if !strings.HasSuffix(m.Pathname, deleted) && unix.Stat(host, &st) == nil && st.Ino == m.Inode && st.Dev == uint64(m.Dev) {
		return host
	}
	return filepath.Join(dir, "map_files", fmt.Sprintf("%x-%x", m.StartAddr, m.EndAddr))
}

// backendLib is the file name ggml's backend loader looks for: libggml-NAME.so, or
// libggml-NAME-VARIANT.so for the CPU's variants.
var backendLib = regexp.MustCompile(`^libggml-([a-z0-9]+)[-.]`)

// backendLibrary is the backend a GGML library at path holds, other than the base and
// the CPU's; "" for any other file.
func backendLibrary(path string) string {
	m := backendLib.FindStringSubmatch(filepath.Base(path))
	if m == nil || m[1] == "base" || m[1] == "cpu" {
		return ""
	}
	return m[1]
}

// CPUVariant is the variant of ggml's CPU backend that the library at path holds, from
// its name as ggml's backend loader looks for it: libggml-cpu-haswell.so gives haswell,
// libggml-cpu-armv8.2_1.so armv8.2_1. Any other object gives "": a plain libggml-cpu.so
// (built without GGML_CPU_ALL_VARIANTS, for the build machine's CPU or a default one),
// libggml.so before the backends had libraries of their own, or an executable that links
// ggml statically; none of their names says which instruction sets its kernels use.
func CPUVariant(path string) string {
	rest, ok := strings.CutPrefix(filepath.Base(path), "libggml-cpu-")
	v, _, so := strings.Cut(rest, ".so")
	if !ok || !so {
		return ""
	}
	return v
}

// nsPID returns the PID of pid in its innermost PID namespace (NSpid in status).
func nsPID(root string, pid int) int {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "status"))
	if err != nil {
		return pid
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
				return n
			}
		}
	}
	return pid
}

// Executable returns the path of the program process proc runs, as its link in /proc
// shows it, without the mark of a program replaced on disk since it started.
func Executable(proc procfs.Proc) (string, error) {
	exe, err := proc.Executable()
	return strings.TrimSuffix(exe, deleted), err
}

// PIDs lists the processes, or those running exe when exe is set (matched by path as the
// host sees it through /proc/PID/exe, also after the file was replaced on disk).
func PIDs(fs procfs.FS, exe string) ([]int, error) {
	procs, err := fs.AllProcs()
	if err != nil {
		return nil, err
	}
	var pids []int
	self := os.Getpid()
	for _, p := range procs {
		if p.PID == self {
			continue
		}
		if exe != "" {
			if e, err := Executable(p); err != nil || e != exe {
				continue
			}
		}
		pids = append(pids, p.PID)
	}
	return pids, nil
}

// VSize is the virtual memory size of a process: it changes when the process maps a
// library, so it tells cheaply whether a process found not to be GGML should be looked
// at again.
func VSize(fs procfs.FS, pid int) (uint64, error) {
	p, err := fs.Proc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return uint64(st.VSize), nil
}

// LinkBase is the link-time address of the start of an object file, as its first PT_LOAD
// maps it: 0 for shared objects and PIE executables, and the fixed address (0x400000 on
// x86-64) of a non-PIE executable, such as a fully static llama.cpp.
func LinkBase(path string) uint64 {
	f, err := elf.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			return p.Vaddr - p.Off
		}
	}
	return 0
}
