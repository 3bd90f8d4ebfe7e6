// Package backends names the GGML backends a process computes on. A backend, and each
// buffer of tensors, points to its implementation's functions (ggml_backend_cpu_get_name,
// ggml_backend_rpc_buffer_get_base, …); the name is read from the symbol that such a
// function pointer lands on in the target's own binaries, so no backend list is built in.
package backends

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ianlancetaylor/demangle"
	"github.com/prometheus/procfs"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/symbols"
)

// Unknown names a backend whose function could not be resolved.
const Unknown = "unknown"

// CPU is the CPU backend's name.
const CPU = "CPU"

// Vulkan is ggml-vulkan's backend name.
const Vulkan = "VK"

var implementation = regexp.MustCompile(`^ggml_backend_([a-z0-9]+)_`)

// Name returns the backend a function symbol implements, upper-cased as ggml prints
// backend names: ggml_backend_cpu_get_name and ggml_backend_cpu_buffer_get_base give
// "CPU", the C++ symbol of ggml_backend_rpc_name gives "RPC"; "" if it is no backend's.
func Name(symbol string) string {
	m := implementation.FindStringSubmatch(demangle.Filter(symbol, demangle.NoParams))
	if m == nil {
		return ""
	}
	return strings.ToUpper(m[1])
}

// registration is the function by which ggml's loader registers a backend library's
// backend: ggml_backend_vk_reg, ggml_backend_cuda_reg.
var registration = regexp.MustCompile(`^ggml_backend_([a-z0-9]+)_reg$`)

// Registered returns the backend a backend library registers, named as Name names its
// functions' (libggml-vulkan.so gives "VK"), or "" where f registers none.
func Registered(f *symbols.File) string {
	for n := range f.Names() {
		if m := registration.FindStringSubmatch(n); m != nil && m[1] != "cpu" {
			return strings.ToUpper(m[1])
		}
	}
	return ""
}

// OnDevice says whether a backend library, named as discover names it (libggml-rpc.so
// gives "rpc"), computes on a device: RPC's sends graphs to a server, and only when one
// is named; BLAS computes on the CPU.
func OnDevice(library string) bool { return library != "rpc" && library != "blas" }

// Software returns the software driver whose device threads process pid runs, read from
// their names (SoftwareThread); "" for none, or where the threads cannot be read.
func Software(root string, pid int) string {
	comms, _ := filepath.Glob(filepath.Join(root, strconv.Itoa(pid), "task", "*", "comm"))
	for _, c := range comms {
		if b, err := os.ReadFile(c); err == nil {
			if sw := SoftwareThread(strings.TrimSuffix(string(b), "\n")); sw != "" {
				return sw
			}
		}
	}
	return ""
}

// SoftwareThread returns the software driver that names a thread so, or "": Mesa's
// lavapipe starts a thread llvmpipe-N per core for each Vulkan device it makes, in the
// process that makes it.
func SoftwareThread(name string) string {
	if strings.HasPrefix(name, "llvmpipe-") {
		return "lavapipe"
	}
	return ""
}

// Opener opens the ELF file at a host path, identified by device and inode for caching.
type Opener func(path string, dev, inode uint64) (*symbols.File, error)

// Resolver names the backends of one process by function address. It reads the GGML
// objects the process maps (libraries named for GGML, and the objects discovery found
// GGML in, such as a binding's addon) when it is made, so that the events of a process that has
// exited by the time they are read still resolve; an address outside them makes it look
// at the mappings again, for a backend loaded since. The executable is read only when an
// address lands in it: a statically linked one holds the backends (and its probes had it
// read already), but a binding's (node's) is large and holds none.
type Resolver struct {
	fs    procfs.FS
	pid   int
	root  string // where fs is mounted: /proc
	open  Opener
	code  []code
	names map[uint64]string
	ggml  map[identity]bool // the objects discovery found GGML in
}

type identity struct{ dev, inode uint64 }

// code is one executable mapping of a GGML object, or of the executable.
type code struct {
	start, end, bias uint64
	file             *symbols.File
	path             string // to open file from when it is first needed
	shown            string // the path as the process sees it
	dev, inode       uint64
}

// NewResolver returns a resolver for process pid of fs, which is mounted at root;
// modules are the objects that discovery found GGML in.
func NewResolver(fs procfs.FS, root string, pid int, open Opener, modules ...*discover.Module) *Resolver {
	r := &Resolver{fs: fs, root: root, pid: pid, open: open, names: map[uint64]string{}, ggml: map[identity]bool{}}
	for _, m := range modules {
		if m != nil {
			r.ggml[identity{m.Dev, m.Inode}] = true
		}
	}
	r.mappings()
	return r
}

// mappings reads the executable mappings of the objects that may hold backends: GGML's
// libraries, the objects that link it in, and the executable, which holds them all when
// it is linked statically.
func (r *Resolver) mappings() {
	proc, err := r.fs.Proc(r.pid)
	if err != nil {
		return
	}
	maps, err := proc.ProcMaps()
	if err != nil {
		return
	}
	exe, _ := discover.Executable(proc)
	bias := map[string]uint64{} // the mapping at file offset 0 gives the load address
	for _, m := range maps {
		if m.Offset == 0 && m.Pathname != "" {
			bias[m.Pathname] = uint64(m.StartAddr)
		}
	}
	r.code = r.code[:0]
	for _, m := range maps {
		if !m.Perms.Execute || m.Inode == 0 {
			continue
		}
		path := discover.Path(m)
		ggml := strings.Contains(filepath.Base(path), "ggml") || r.ggml[identity{uint64(m.Dev), m.Inode}]
		if !ggml && path != exe {
			continue
		}
		host := discover.Host(r.root, r.pid, m)
		c := code{start: uint64(m.StartAddr), end: uint64(m.EndAddr), bias: bias[m.Pathname] - discover.LinkBase(host),
			path: host, shown: path, dev: uint64(m.Dev), inode: m.Inode}
		if ggml && !c.load(r.open) {
			continue
		}
		r.code = append(r.code, c)
	}
}

// Name returns the backend whose function is at run-time address addr, or Unknown.
func (r *Resolver) Name(addr uint64) string {
	if name, ok := r.names[addr]; ok {
		return name
	}
	name, mapped := r.resolve(addr)
	if !mapped {
		r.mappings()
		name, _ = r.resolve(addr)
	}
	if name == "" {
		name = Unknown
	}
	r.names[addr] = name
	return name
}

// Module returns the object whose code holds addr, as read when it was last named; nil
// if none does.
func (r *Resolver) Module(addr uint64) *discover.Module {
	for _, c := range r.code {
		if addr >= c.start && addr < c.end {
			return &discover.Module{Path: c.shown, HostPath: c.path, Bias: c.bias, Dev: c.dev, Inode: c.inode}
		}
	}
	return nil
}

// load opens c's file, and says whether it could.
func (c *code) load(open Opener) bool {
	if c.file == nil {
		c.file, _ = open(c.path, c.dev, c.inode)
	}
	return c.file != nil
}

// resolve names addr from the mappings read so far, and says whether one holds it.
func (r *Resolver) resolve(addr uint64) (string, bool) {
	for i := range r.code {
		c := &r.code[i]
		if addr < c.start || addr >= c.end {
			continue
		}
		if !c.load(r.open) {
			return "", true
		}
		if sym, ok := c.file.At(addr - c.bias); ok {
			return Name(sym.Name), true
		}
		// A stripped object: a backend that names itself with a constant (the CPU's) is
		// still known by that.
		name, _ := c.file.StringReturn(symbols.Symbol{Name: fmt.Sprintf("%#x", addr-c.bias), Value: addr - c.bias})
		return name, true
	}
	return "", false
}
