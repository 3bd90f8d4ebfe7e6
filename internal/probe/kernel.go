package probe

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/caps"
)

// Kernel is what the running kernel offers the programs, found by probing its features,
// never by its version: distributions backport.
type Kernel struct {
	Release     string
	Loop        bool // bpf_loop (Linux 5.17): a decode's whole batch is summed, and a start verifies less
	PrevState   bool // sched_switch's prev_state argument (5.18)
	UprobeMulti bool // uprobe_multi links (6.6): windows open and close without stalling the target
	// SockLength: the socket layer's sock_recv_length and sock_send_length tracepoints
	// (6.5), which the connections layer uses in place of every syscall's.
	SockLength bool

	memlock error // why RLIMIT_MEMLOCK, which kernels before 5.11 charge maps to, could not be raised
}

// variant is a program and the one that stands in for it where the kernel lacks what it
// needs, if any. Both are in the object; only the one the kernel runs is loaded.
type variant struct {
	program, fallback string
	runs              func(Kernel) bool
}

var variants = []variant{
	{"decode_enter", "decode_enter_bounded", func(k Kernel) bool { return k.Loop }},
	{"decode_method_enter", "decode_method_enter_bounded", func(k Kernel) bool { return k.Loop }},
	{"graph_enter", "graph_enter_bounded", func(k Kernel) bool { return k.Loop }},
	{"graph_exit", "graph_exit_bounded", func(k Kernel) bool { return k.Loop }},
	{"split_exit", "split_exit_bounded", func(k Kernel) bool { return k.Loop }},
	{"times_print", "", func(k Kernel) bool { return k.Loop }},
	{"sched_switch", "sched_switch_task", func(k Kernel) bool { return k.PrevState }},
}

// uprobePMU is where the kernel lists its uprobe perf event type: present when
// CONFIG_UPROBE_EVENTS is, whether or not tracefs is mounted.
const uprobePMU = "/sys/bus/event_source/devices/uprobe/type"

// ProbeKernel finds what the kernel offers. It fails, naming what is missing, when the
// kernel lacks what profinfer cannot run without: privileges to load programs, BTF,
// uprobes and the BPF ring buffer. types keeps the kernel's BTF it decodes for the loads
// that follow: decoding it is most of a start's CPU.
func ProbeKernel(types *btf.Cache) (Kernel, error) {
	k := Kernel{Release: release()}
	if !Privileged() {
		return k, errors.New("profinfer needs root, or CAP_BPF and CAP_PERFMON")
	}
	missing := func(what, since string, err error) error {
		return fmt.Errorf("Linux %s has no %s, which profinfer needs (%s): %w", k.Release, what, since, err)
	}
	kernelBTF, err := types.Kernel()
	if err != nil {
		return k, missing("BTF", "CONFIG_DEBUG_INFO_BTF, /sys/kernel/btf/vmlinux", err)
	}
	if _, err := os.Stat(uprobePMU); err != nil {
		return k, missing("uprobes", "CONFIG_UPROBE_EVENTS", err)
	}
	if ok, err := have(features.HaveMapType(ebpf.RingBuf)); err != nil {
		return k, fmt.Errorf("probing the kernel for BPF ring buffers: %w", err)
	} else if !ok {
		return k, missing("BPF ring buffer", "Linux 5.8", ebpf.ErrNotSupported)
	}
	if k.Loop, err = have(features.HaveProgramHelper(ebpf.Kprobe, asm.FnLoop)); err != nil {
		return k, fmt.Errorf("probing the kernel for bpf_loop: %w", err)
	}
	if k.UprobeMulti, err = have(features.HaveBPFLinkUprobeMulti()); err != nil {
		return k, fmt.Errorf("probing the kernel for uprobe_multi links: %w", err)
	}
	k.PrevState = tracepointArgs(kernelBTF, "sched_switch") >= 4
	k.SockLength = tracepointArgs(kernelBTF, "sock_recv_length") >= 0 && tracepointArgs(kernelBTF, "sock_send_length") >= 0
	return k, nil
}

// have turns a feature probe's answer into a yes or no, or the error that prevented one.
func have(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ebpf.ErrNotSupported):
		return false, nil
	}
	return false, err
}

// tracepointArgs is the number of arguments the kernel's BTF gives a raw tracepoint
// (tp_btf) program of tracepoint name, or -1 when it has no such tracepoint.
func tracepointArgs(spec *btf.Spec, name string) int {
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return -1
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return -1
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return -1
	}
	return len(proto.Params) - 1 // the first is the tracepoint's own data pointer
}

// Degraded says, for each thing this kernel lacks that profinfer can do without, what is
// lost with it; nothing for a kernel that lacks nothing.
func (k Kernel) Degraded() []string {
	var d []string
	if !k.Loop {
		d = append(d, fmt.Sprintf("no bpf_loop (Linux 5.17): a decode's batch is summed per sequence from its first %d tokens; "+
			"a longer batch's spans say llama.batch.partial and its requests count fewer prompt tokens; "+
			"a GPU split's nodes are not read, nor ggml-vulkan's perf logger's times", BoundedBatch))
	}
	if !k.SockLength {
		d = append(d, "no socket tracepoints (Linux 6.5): the connections layer follows a server's requests on the raw syscall tracepoints, "+
			"which slow every syscall of the machine (some 130 ns each) while a process is traced; layers.connections: false turns it off")
	}
	if !k.UprobeMulti {
		d = append(d, "no uprobe_multi links (Linux 6.6): node probes are perf-event uprobes, and attaching or detaching them "+
			"stalls the target's threads (docs/kernels.md says what that costs and how windows avoid it)")
	}
	return d
}

// BoundedBatch is BOUNDED_BATCH in the programs: the tokens of a decode's batch summed
// without bpf_loop.
const BoundedBatch = 2048

// Privileged says whether this process may load eBPF programs and attach uprobes: root's
// CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON (Linux 5.8).
func Privileged() bool {
	admin, known := caps.Have(unix.CAP_SYS_ADMIN)
	if !known {
		return true // cannot tell: let the kernel say
	}
	bpf, _ := caps.Have(unix.CAP_BPF, unix.CAP_PERFMON)
	return admin || bpf
}

func release() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "(unknown release)"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// loadError says why loading failed: the verifier's rejection with its last lines, which
// is no matter of privileges even when the kernel reports EACCES; missing privileges only
// where they are missing.
func loadError(k Kernel, err error) error {
	what := "profinfer's eBPF programs"
	if m := programName.FindStringSubmatch(err.Error()); m != nil {
		what = "eBPF program " + m[1]
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		log := ve.Log
		if n := len(log); n > 0 && strings.HasPrefix(log[n-1], "processed ") {
			log = log[:n-1]
		}
		if len(log) > 8 {
			log = log[len(log)-8:]
		}
		return fmt.Errorf("the verifier of Linux %s rejected %s (%v); its last lines:\n  %s",
			k.Release, what, ve.Cause, strings.Join(log, "\n  "))
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		if !Privileged() {
			return fmt.Errorf("loading %s: %w: profinfer needs root, or CAP_BPF and CAP_PERFMON", what, err)
		}
		if k.memlock != nil {
			return fmt.Errorf("loading %s on Linux %s: %w: this kernel charges BPF maps to RLIMIT_MEMLOCK, "+
				"which could not be raised (%v): give profinfer CAP_SYS_RESOURCE, or a higher memlock limit", what, k.Release, err, k.memlock)
		}
	}
	return fmt.Errorf("loading %s on Linux %s: %w", what, k.Release, err)
}

// programName finds the program cilium/ebpf names in a load error.
var programName = regexp.MustCompile(`program (\w+): `)
