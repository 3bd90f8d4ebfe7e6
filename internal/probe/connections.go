package probe

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/profinfer/profinfer/bpf"
)

// The connections layer's programs, loaded apart, as they are attached: the socket
// layer's tracepoints, which only socket receives and sends and TCP's state changes pass;
// before Linux 6.5, the raw syscall tracepoints, which take every syscall of the machine
// through the kernel's slower path while attached (some 130 ns a syscall here, and a
// server's threads make hundreds of futex calls a token).
var (
	ConnSockets  = []string{bpf.ProfinferProgSockRecv, bpf.ProfinferProgSockSend, bpf.ProfinferProgSockState}
	ConnSyscalls = []string{bpf.ProfinferProgSysEnter, bpf.ProfinferProgSysExit}
)

func connProgram(name string) bool {
	return slices.Contains(ConnSockets, name) || slices.Contains(ConnSyscalls, name)
}

// AttachConnections loads and attaches the connections layer, the set the kernel has.
func (l *Loaded) AttachConnections() (Links, error) {
	if l.Kernel.SockLength {
		return l.Programs.AttachSet(ConnSockets)
	}
	return l.Programs.AttachSet(ConnSyscalls)
}

// AttachSet loads the programs named and attaches each (tracing programs: fentry,
// fexit, tp_btf), on the shared maps; closing the links closes the programs too.
func (p *Programs) AttachSet(names []string) (Links, error) {
	spec := p.spec.Copy()
	for name := range spec.Programs {
		if !slices.Contains(names, name) {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: p.maps})
	if err != nil {
		return nil, loadError(p.kernel, err)
	}
	for _, m := range coll.Maps { // clones of the shared maps, and the constants the programs hold
		m.Close()
	}
	var links Links
	for _, name := range names {
		lk, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[name]})
		if err != nil {
			links.Close()
			coll.Close()
			return nil, fmt.Errorf("attaching %s: %w", name, err)
		}
		links = append(links, lk)
	}
	for _, prog := range coll.Programs {
		links = append(links, prog)
	}
	return links, nil
}
