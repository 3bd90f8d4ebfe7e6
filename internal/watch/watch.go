// Package watch tells discovery which processes to look at, from kernel hooks instead of
// a timer: processes that exec or whose dynamic loader loaded objects (at start, or when a
// binding dlopens its backend), and traced processes that exit or exec.
package watch

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/bpf"
	"github.com/profinfer/profinfer/internal/ringread"
)

// Kind is what a notice says of its process.
type Kind uint32

const (
	Mapped Kind = 1 // new code; look once its loader settles
	Exited Kind = 2 // a traced process exited
	Execed Kind = 3 // a traced process replaced its image
)

// Notice is one process to look at.
type Notice struct {
	PID  int
	Kind Kind
	Exit Exit // an Exited notice's
}

// Exit is how a traced process ended, as the kernel gives it.
type Exit struct {
	At     uint64 // CLOCK_MONOTONIC ns, the clock of the profiler's records
	Status uint32 // wait(2)'s status
	// OOM says that the kernel's OOM killer chose the process, for its memory cgroup's
	// limit or for the system's memory: which one, the cgroup's counts tell.
	OOM bool
}

// Signal is the signal that killed the process; 0 where it exited.
func (e Exit) Signal() int { return int(e.Status & 0x7f) }

// Code is the process's exit status where it exited (Signal is 0).
func (e Exit) Code() int { return int(e.Status >> 8 & 0xff) }

// Core says that the signal dumped core.
func (e Exit) Core() bool { return e.Status&0x80 != 0 }

// noticeSize is the size of watch.bpf.c's struct notice.
const noticeSize = 24

// parse reads a notice record.
func parse(b []byte) (Notice, error) {
	if len(b) < noticeSize {
		return Notice{}, fmt.Errorf("notice record of %d bytes, want %d", len(b), noticeSize)
	}
	e := binary.NativeEndian
	n := Notice{PID: int(e.Uint32(b)), Kind: Kind(e.Uint32(b[4:]))}
	if n.Kind == Exited {
		n.Exit = Exit{At: e.Uint64(b[8:]), Status: e.Uint32(b[16:]), OOM: e.Uint32(b[20:]) != 0}
	}
	return n, nil
}

// Loaders are the dynamic loaders whose debugger hook reports loaded objects, as the
// host's file system names them. Processes whose loader is elsewhere (another mount
// namespace's, say) are noticed at exec, and at the periodic scan after a dlopen. They
// are the host's own architecture's, which is the collector's.
var Loaders = map[string][]string{
	"amd64": {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-x86-64.so.2", "/lib/ld-musl-x86_64.so.1"},
	"arm64": {"/lib/ld-linux-aarch64.so.1", "/lib64/ld-linux-aarch64.so.1", "/lib/ld-musl-aarch64.so.1"},
}[runtime.GOARCH]

// hostRoot is the root of init's mount namespace: profinfer in a container of its own
// (with the host's PID namespace, as a DaemonSet runs it) finds the host's loaders there,
// not in its own image.
const hostRoot = "/proc/1/root"

// Watcher owns the hooks and the ring buffer they write notices to.
type Watcher struct {
	objs   bpf.WatchObjects
	reader *ringread.Reader
	rec    ringbuf.Record

	mu      sync.Mutex // links and closed: Follow runs on discovery's goroutine, Close on another
	links   []link.Link
	closed  bool
	loaders map[[2]uint64]bool // the loaders hooked, by device and inode
	exes    map[[2]uint64]bool // the executables whose loader was looked for
	multi   bool               // the loader hook is a uprobe_multi program
}

// Open loads and attaches the hooks; traced is the profiler's map of traced processes,
// and types the kernel's BTF, decoded once for every load at start. multi says that the
// kernel has uprobe_multi links (6.6), which the loader hook then is: a process with
// CAP_PERFMON but not CAP_SYS_ADMIN may be refused a perf event's uprobe where it may
// link one (profinfer's DaemonSet). A loader hook that cannot be placed does not fail
// Open: the returned Watcher works without it, and the error says what is missing.
func Open(traced *ebpf.Map, types *btf.Cache, multi bool) (*Watcher, error) {
	spec, err := bpf.LoadWatch()
	if err != nil {
		return nil, fmt.Errorf("reading the watch eBPF object: %w", err)
	}
	if multi {
		spec.Programs[bpf.WatchProgLoaderState].AttachType = ebpf.AttachTraceUprobeMulti
	}
	w := &Watcher{loaders: map[[2]uint64]bool{}, exes: map[[2]uint64]bool{}, multi: multi}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{"traced": traced}, Cache: types}
	if err := spec.LoadAndAssign(&w.objs, opts); err != nil {
		return nil, fmt.Errorf("loading the process hooks: %w", err)
	}
	for _, prog := range []*ebpf.Program{w.objs.ProcessExec, w.objs.ProcessExit} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("attaching the process hooks: %w", err)
		}
		w.links = append(w.links, l)
	}
	if w.reader, err = ringread.NewReader(w.objs.Notices); err != nil {
		w.Close()
		return nil, fmt.Errorf("opening the notice ring buffer: %w", err)
	}
	return w, w.attachLoaders()
}

// attachLoaders places the loader hook on each of Loaders present, in profinfer's own
// root and the host's, once per file. Where neither has one (profinfer in a container
// that cannot see the host's root), Follow hooks each process's own as it is noticed.
func (w *Watcher) attachLoaders() error {
	var errs []error
	for _, root := range []string{"/", hostRoot} {
		for _, name := range Loaders {
			if err := w.hook(root, name); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// maxLoaders bounds the loader files hooked (a container image's loader is a file of its
// own), and maxExes the executables remembered as looked at.
const (
	maxLoaders = 64
	maxExes    = 4096
)

// Follow places the loader hook on the dynamic loader of the process at proc (its
// /proc/PID), where that file has none yet: a process in a container has its image's
// loader, not the host's, and a uprobe is placed on a file. It costs a stat for an
// executable already looked at. A process without a loader (static, a kernel thread,
// gone) has nothing to hook, and is no error.
func (w *Watcher) Follow(proc string) error {
	var st unix.Stat_t
	if unix.Stat(proc+"/exe", &st) != nil {
		return nil
	}
	key := [2]uint64{st.Dev, st.Ino}
	if w.exes[key] {
		return nil
	}
	if len(w.exes) >= maxExes {
		clear(w.exes)
	}
	w.exes[key] = true
	interp, err := interpreter(proc + "/exe")
	if err != nil || interp == "" {
		return err
	}
	return w.hook(proc+"/root", interp)
}

// hook places the loader hook on the loader at name, as the processes whose root is
// root see it, unless that file was hooked or tried before.
func (w *Watcher) hook(root, name string) error {
	path, err := within(root, name)
	var st unix.Stat_t
	if err == nil {
		err = unix.Stat(path, &st)
	}
	if err != nil {
		return fmt.Errorf("dynamic loader %s under %s: %w", name, root, err)
	}
	key := [2]uint64{st.Dev, st.Ino}
	if w.loaders[key] || len(w.loaders) >= maxLoaders {
		return nil
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return fmt.Errorf("dynamic loader %s: %w", path, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	// Through one process's root the file may be out of reach (a process of another
	// user namespace's), through the next one's not: only a hook placed marks it done.
	var l link.Link
	if w.multi {
		l, err = ex.UprobeMulti([]string{"_dl_debug_state"}, w.objs.LoaderState, nil)
	} else {
		l, err = ex.Uprobe("_dl_debug_state", w.objs.LoaderState, nil)
	}
	if err != nil {
		return fmt.Errorf("dynamic loader %s: %w", path, err)
	}
	w.loaders[key] = true
	w.links = append(w.links, l)
	return nil
}

// interpreter is the program interpreter (PT_INTERP) the executable at path names:
// "" for a static one.
func interpreter(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, min(p.Filesz, unix.PathMax))
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("%s: reading its interpreter: %w", path, err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// Read waits until deadline for a notice, and appends to got every notice that came by
// then, with the rest of the batch read at once. It returns os.ErrDeadlineExceeded when
// the deadline passes with none (a past deadline reads without waiting), and
// ringbuf.ErrClosed once Close was called.
func (w *Watcher) Read(deadline time.Time, got []Notice) ([]Notice, error) {
	for {
		err := w.reader.ReadInto(&w.rec, deadline)
		switch {
		case err != nil && len(got) > 0 && errors.Is(err, os.ErrDeadlineExceeded):
			return got, nil
		case err != nil:
			return got, err
		}
		n, err := parse(w.rec.RawSample)
		if err != nil {
			return got, err
		}
		got = append(got, n)
		deadline = past
	}
}

// past is a deadline that has passed: a read with it does not wait.
var past = time.Unix(1, 0)

// Close detaches the hooks; a Read in progress returns ringbuf.ErrClosed.
func (w *Watcher) Close() error {
	var errs []error
	if w.reader != nil {
		errs = append(errs, w.reader.Close())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, l := range w.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, w.objs.Close())
	return errors.Join(errs...)
}
