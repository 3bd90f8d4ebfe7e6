// Package probe attaches profinfer's eBPF programs to the GGML code of the traced
// processes and owns the resulting links: the lasting probes once per file (Pool), the
// node and device probes per process. Each probe sits on the first instruction of its
// function that the kernel emulates, so a hit costs about 1 µs instead of a 12 µs
// single-step.
package probe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/profinfer/profinfer/bpf"
)

// Layers selects which probes to attach.
type Layers struct {
	Application bool // llama_decode, whisper_full_with_state, and steps (AttachSteps)
	Runtime     bool // graphs: the backend scheduler's and the CPU backend's
	Barriers    bool // with the node probes, ggml_barrier: per-thread busy time
	Scheduler   bool // sched_switch and sched_wakeup, for the traced processes' threads
	Counters    bool // with the node probes, each thread's graph exit: perf counters per node
	Connections bool // socket calls: when each request reached a server, and its answer (Loaded.AttachConnections)
}

// PrepareMulti makes spec's uprobe programs uprobe_multi programs, for kernels with
// uprobe_multi links (Linux 6.6). Closing a perf-event uprobe that a thread is hitting
// blocks that thread: its handler asks to remove the breakpoint and waits on the uprobe's
// lock, which the closer holds across an RCU grace period. With a uprobe_multi link the
// consumer is gone before that, so the thread runs on. The node probes come and go with
// every sampling window while the model runs through them.
func PrepareMulti(spec *ebpf.CollectionSpec) {
	for _, p := range spec.Programs {
		if strings.HasPrefix(p.SectionName, "uprobe/") || strings.HasPrefix(p.SectionName, "uretprobe/") {
			p.AttachType = ebpf.AttachTraceUprobeMulti
		}
	}
}

// Tracepoints attaches the tracepoint programs the layers need, which serve every traced
// process; the processes are chosen by Trace. Runtime: the names threads take, for a
// device that runs in threads of the process's own (lavapipe's). Scheduler: sched_switch
// and sched_wakeup. Counters: thread starts, so that a new thread's counters open before
// it computes. Connections are attached apart (Loaded.AttachConnections).
func Tracepoints(progs *bpf.ProfinferPrograms, l Layers) ([]link.Link, error) {
	var want []tracepoint
	if l.Runtime {
		want = append(want, tracepoint{"task_rename", progs.ThreadName})
	}
	if l.Scheduler {
		want = append(want, tracepoint{"sched_switch", progs.SchedSwitch}, tracepoint{"sched_wakeup", progs.SchedWakeup})
	}
	if l.Counters {
		want = append(want, tracepoint{"sched_process_fork", progs.ThreadStart})
	}
	return attachTracing(want)
}

type tracepoint struct {
	name string
	prog *ebpf.Program
}

func attachTracing(want []tracepoint) ([]link.Link, error) {
	var links []link.Link
	for _, tp := range want {
		lk, err := link.AttachTracing(link.TracingOptions{Program: tp.prog})
		if err != nil {
			closeAll(links)
			return nil, fmt.Errorf("attaching to tracepoint %s: %w", tp.name, err)
		}
		links = append(links, lk)
	}
	return links, nil
}

// Trace adds process pid to the traced processes, whose lasting probes report (see
// Pool), whose threads the scheduler programs follow, whose exit the process hooks report
// and whose lost records are counted, or removes it.
func Trace(maps *bpf.ProfinferMaps, pid int, on bool) error {
	key := uint32(pid)
	if on {
		return errors.Join(maps.Traced.Put(key, uint32(0)), maps.Lost.Put(key, uint64(0)),
			maps.ConnOwners.Put(key, bpf.ProfinferConnOwner{Tgid: key}))
	}
	err := maps.Remember.Delete(key)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		err = nil
	}
	return errors.Join(maps.Traced.Delete(key), maps.Lost.Delete(key), maps.ConnOwners.Delete(key), err)
}

// Front has the connections of process front, which takes requests and hands them to
// traced process pid (ollama serve, to its runner), followed as pid's: a request's
// arrival there is when its client sent it. Off, it stops where front still hands to pid.
// A front traced itself keeps its own.
func Front(maps *bpf.ProfinferMaps, front, pid int, on bool) error {
	key := uint32(front)
	var o bpf.ProfinferConnOwner
	found := maps.ConnOwners.Lookup(key, &o) == nil
	switch {
	case on && found && o.Front == 0:
		return nil
	case on:
		return maps.ConnOwners.Put(key, bpf.ProfinferConnOwner{Tgid: uint32(pid), Front: 1})
	case found && o.Front == 1 && o.Tgid == uint32(pid):
		return maps.ConnOwners.Delete(key)
	}
	return nil
}

// Serving has what process pid served on before profinfer came followed as what it
// serves on from now on: the ports it listens on, and its connections accepted on them
// (fds), whose reads are known to be a client's, not a file's. One followed already
// keeps its state.
func Serving(maps *bpf.ProfinferMaps, pid int, ports, fds []int) error {
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			errs = append(errs, err)
		}
	}
	for _, port := range ports {
		keep(maps.Listening.Update(bpf.ProfinferPortKey{Tgid: uint32(pid), Port: uint32(port)}, uint8(1), ebpf.UpdateAny))
	}
	for _, fd := range fds {
		keep(maps.Conns.Update(bpf.ProfinferConnKey{Tgid: uint32(pid), Fd: uint32(fd)}, uint32(0), ebpf.UpdateNoExist))
	}
	return errors.Join(errs...)
}

// Lost returns how many records of traced process pid were lost so far; 0 where it is
// not traced.
func Lost(maps *bpf.ProfinferMaps, pid int) uint64 {
	var n uint64
	if err := maps.Lost.Lookup(uint32(pid), &n); err != nil {
		return 0
	}
	return n
}

// Remember lets the node programs send each node's detail of process pid once per graph
// build instead of at every node start, from now on (now is CLOCK_MONOTONIC in ns); the
// build probe (see SeesBuilds) must be attached. Calling it again has every detail sent
// again.
func Remember(maps *bpf.ProfinferMaps, pid int, now uint64) error {
	// A new stamp forgets what was sent to a process that had pid before, or before now.
	return errors.Join(maps.Built.Put(uint32(0), now), maps.Remember.Put(uint32(pid), uint8(1)))
}

// Window tells the programs that a sampling window on traced process pid lasts for
// graphs more graph computations, the end of the last of which wakes the reader to close
// it (and so does every graph or decode end after it, until the reader does); 0 means no
// window is open.
func Window(maps *bpf.ProfinferMaps, pid, graphs int) error {
	return maps.Traced.Update(uint32(pid), uint32(graphs), ebpf.UpdateExist)
}
