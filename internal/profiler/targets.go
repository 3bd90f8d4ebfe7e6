package profiler

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/describe"
	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/registry"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/runtimes"
	"github.com/profinfer/profinfer/internal/signals"
	"github.com/profinfer/profinfer/internal/simd"
	"github.com/profinfer/profinfer/internal/sockets"
	"github.com/profinfer/profinfer/internal/watch"
)

// The registry's calls, on its own goroutine: it attaches a new process's probes itself,
// then hands the process to the controller, which has the reader mark it traced.

// errStopping refuses a process found as the profiler stops.
var errStopping = errors.New("the profiler is stopping")

// Trace puts probes on a GGML process the registry found, and starts tracking it.
func (p *Profiler) Trace(f *registry.Found) error {
	defer p.busy()()
	pid, proc := f.Proc.PID, f.Proc
	refuse := func(err error) error {
		return registry.Refuse(metadata.AttributeProfinferAttachReasonProbes, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	progs, err := p.bpf.Programs.For(f.Target.Layout)
	if err != nil {
		return refuse(err)
	}
	a, err := probe.Attach(p.ctl.pool, progs, proc, p.reg.Files.Open, p.cfg.Layers, p.bpf.Multi())
	if a == nil {
		return refuse(err)
	}
	switch {
	case err != nil && p.reg.Vanished(pid):
		p.log.Debug("some probes not attached: the process exited or unmapped GGML", zap.Int("pid", pid), zap.Error(err))
	case err != nil:
		p.log.Warn("some probes not attached", zap.Int("pid", pid), zap.Error(err))
	}
	ct := &ctlProc{pid: pid, attachment: a, runtime: f.Runtime, args: f.Process.Args, parent: f.Process.Parent,
		whisper: f.Whisper, noModel: !f.Runtime.GGUF} // whisper's model is read from its context
	in := &inProc{
		proc: signals.Origin{PID: pid, VPID: proc.VPID, Exe: proc.Exe, BuildID: f.BuildID, GGML: f.Target.Version,
			Container: f.Container, Backends: strings.Join(proc.Backends, ","), Runtime: f.Runtime.Name,
			LlamaBuild: f.Build.Number, LlamaCommit: f.Build.Commit, OSVersion: p.kernel,
			CPUVariant: discover.CPUVariant(proc.Module(discover.CPU).Path), SIMD: p.buildSIMD(proc), HostSIMD: p.hostSIMD},
		runtime:   f.Runtime,
		backends:  backends.NewResolver(p.reg.FS(), "/proc", pid, p.reg.Files.Get, proc.Modules[:]...),
		describer: describe.New(f.Target),
		whisper:   f.Whisper != nil,
		ctxFields: f.Context,
	}
	in.cpus, in.allowed, _ = p.allowed(pid)
	in.idleAt = p.readIdle() // how idle its CPUs sit from now
	in.ranAtIdle = p.ran(pid)
	holds := p.applicationLayer(ct)
	var probes int
	var splits bool
	ok := p.call(func() {
		c := p.ctl
		c.procs[pid] = ct // first: the effects of its first events find it
		// The lasting probes serve every process that maps their files, and report only
		// the traced ones.
		if !p.ask(func(ig *ingest) {
			if err = probe.Trace(&p.bpf.ProfinferMaps, pid, true); err != nil {
				_ = probe.Trace(&p.bpf.ProfinferMaps, pid, false)
				return
			}
			if p.cfg.Layers.Connections {
				in.front = p.followAccepted(pid, runtimes.Front(f.Process))
			}
			// Traced, its threads' names come as they take them; those taken before
			// are read here.
			in.software = backends.Software("/proc", pid)
			in.traced = monotonic()
			ig.procs[pid] = in
			if holds {
				ig.asm.Steps(uint32(pid))
			}
		}) && err == nil {
			err = errStopping
		}
		if err != nil {
			delete(c.procs, pid)
			return
		}
		p.followConnections()
		switch {
		case !p.cfg.Layers.Runtime:
		case p.cfg.Nodes.Mode == NodesSampled:
			c.windows.Add(pid, workload(pid, proc.Exe), nodeProbes{p, ct})
		case p.cfg.Nodes.Mode == NodesAll: // one window, for good
			c.windows.Add(pid, "", nodeProbes{p, ct})
		}
		// The split probes from the start where the process loaded another backend
		// that it would not load unused, whose first decode may come before they could
		// be added once its scheduler is seen, or where schedulers are not seen.
		// The device probes before the split probes: a split seen has its device's work.
		p.attachDevice(ct, func(a *probe.Attachment) error { return a.AttachDevices(proc) })
		if !a.SeesScheds() || slices.ContainsFunc(proc.Backends, loadedToUse) {
			p.attachSplits(ct)
		}
		probes, splits = a.Probes(), a.Splits()
		p.publish()
	})
	if !ok && err == nil {
		err = errStopping
	}
	if err != nil {
		a.Close()
		if !errors.Is(err, errStopping) {
			err = fmt.Errorf("not marked traced: %w", err)
		}
		return refuse(err)
	}
	p.ends.watch(pid, p.log)
	p.log.Info("attached", zap.Int("pid", pid), zap.String("exe", proc.Exe), zap.String("runtime", f.Runtime.Name),
		zap.String("ggml", cmp.Or(f.Target.Version, "unknown")),
		zap.String("container", cmp.Or(f.Container, "none")), zap.Int("probes", probes), zap.Int("emulated", a.Emulated()),
		zap.Bool("split_probes", splits))
	return nil
}

// followAccepted has what process pid and its front (0 for none) served on before it
// was traced followed (ports, accepted connections), and the front's connections followed
// as pid's, and returns the front whose are.
func (p *Profiler) followAccepted(pid, front int) int {
	maps := &p.bpf.ProfinferMaps
	follow := func(of int) error {
		srv, err := sockets.Read("/proc", of)
		return errors.Join(err, probe.Serving(maps, of, srv.Ports, srv.Accepted))
	}
	if err := follow(pid); err != nil {
		p.log.Debug("connections made before it was traced not followed", zap.Int("pid", pid), zap.Error(err))
	}
	if front == 0 {
		return 0
	}
	if err := probe.Front(maps, front, pid, true); err != nil {
		p.log.Warn("its front's connections not followed: its requests' waits are what it saw itself", zap.Int("pid", pid),
			zap.Int("front", front), zap.Error(err))
		return 0
	}
	if err := follow(front); err != nil {
		p.log.Debug("connections its front made before it was traced not followed", zap.Int("pid", pid), zap.Int("front", front), zap.Error(err))
	}
	return front
}

// buildSIMD is the SIMD proc's CPU backend was compiled for, read from its code once
// at attach, from the file its probes were placed by; "" where it cannot be read.
func (p *Profiler) buildSIMD(proc *discover.Process) string {
	f, err := p.reg.Files.Open(proc.Module(discover.CPU))
	if err != nil {
		return ""
	}
	return simd.Build(f)
}

// Extend adds to a traced process the probes on GGML objects it mapped since profinfer
// attached: a binding that loads libllama with dlopen after its backend.
func (p *Profiler) Extend(proc *discover.Process, ctx *ggml.Context) {
	p.call(func() {
		pid := proc.PID
		t := p.ctl.procs[pid]
		if t == nil {
			return
		}
		added, err := t.attachment.Extend(proc)
		if err != nil {
			p.log.Warn("some probes not attached", zap.Int("pid", pid), zap.Error(err))
		}
		p.attachDevice(t, func(a *probe.Attachment) error { return a.AttachDevices(proc) })
		if len(added) > 0 {
			if rt, _ := runtimes.Of(runtimes.Process{Process: proc, Args: t.args, Parent: t.parent}); rt != nil && rt != t.runtime {
				p.log.Info("runtime recognised in code loaded since attach", zap.Int("pid", pid), zap.String("runtime", rt.Name),
					zap.String("was", t.runtime.Name))
				t.runtime = rt
				t.noModel = t.noModel && !rt.GGUF
			}
		}
		rt := t.runtime
		holds := len(added) > 0 && p.applicationLayer(t)
		backends := strings.Join(proc.Backends, ",") // a binding loads its GPU backend with dlopen too
		llama := slices.Contains(added, discover.Llama)
		p.do(func(in *ingest) {
			tr := in.procs[pid]
			if tr == nil {
				return
			}
			if llama {
				tr.ctxFields = ctx
			}
			tr.proc.Backends = backends
			tr.runtime, tr.proc.Runtime = rt, rt.Name
			if holds {
				in.asm.Steps(uint32(pid))
			}
		})
		if len(added) > 0 {
			p.log.Info("probes added on code loaded since attach", zap.Int("pid", pid), zap.Stringers("roles", added),
				zap.Int("probes", t.attachment.Probes()))
		}
		p.publish()
	})
}

// applicationLayer places or removes the step probes as t's runtime wants them, and says
// whether the assembler is to hold the graphs that come before its first step.
func (p *Profiler) applicationLayer(t *ctlProc) (holds bool) {
	if !p.cfg.Layers.Application {
		return false
	}
	if t.runtime.Steps {
		if err := t.attachment.AttachSteps(); err != nil {
			p.log.Warn("step probes not attached", zap.Int("pid", t.pid), zap.Error(err))
		}
	} else if gone := t.attachment.DetachSteps(); len(gone) > 0 {
		p.closeLater(gone)
	}
	// A runtime's graphs come inside its steps: those before the first step's entry are
	// of a step profinfer came in the middle of. A program of no runtime profinfer knows
	// (an RPC server) may compute none in a scheduler: its graphs go as they come.
	return t.runtime != runtimes.GGML && (t.runtime.Steps || t.attachment.Proc().Module(discover.Llama) != nil)
}

// Traced is the set of traced processes, as the reader has them: a process retired stays
// until the reader has read its last events.
func (p *Profiler) Traced() map[int]bool {
	var set map[int]bool
	p.ask(func(in *ingest) {
		set = make(map[int]bool, len(in.procs))
		for pid := range in.procs {
			set[pid] = true
		}
	})
	return set
}

// Scanned has the controller close the perf counters of threads that are gone, and the
// files' probes no process held for a while.
func (p *Profiler) Scanned() {
	p.call(func() {
		if p.counters != nil {
			p.sweepCounters()
		}
		p.sweepPool()
	})
}

// retiring is a traced process that exited or replaced its image, why, and how it ended
// where the kernel said.
type retiring struct {
	pid int
	why string
	end *signals.End
}

// Retire has the reader drop a traced process once it has read the process's last
// events, which may still wait in the ring buffer: it flushes the ring, and reaps when it
// has drained it.
func (p *Profiler) Retire(pid int, why string, exit *watch.Exit) {
	end := p.ends.end(pid, exit, p.log)
	p.do(func(in *ingest) {
		if in.procs[pid] == nil {
			return
		}
		in.retiring = append(in.retiring, retiring{pid, why, end})
		if err := p.reader.Flush(); err != nil {
			p.log.Debug("flushing the ring buffer", zap.Error(err))
		}
	})
}

// reap drops the retiring processes, on the reader, after a flush: every event submitted
// before it has been dispatched. The controller closes their probes.
func (p *Profiler) reap() {
	in := p.in
	for _, r := range in.retiring {
		t := in.procs[r.pid]
		if t == nil {
			continue
		}
		at := monotonic() // an image replaced, or an end no notice told: about now
		if r.end != nil {
			at = r.end.At
		}
		// Read before Trace forgets it below: what the process lost as it ended.
		in.asm.Exit(uint32(r.pid), at, probe.Lost(&p.bpf.ProfinferMaps, r.pid))
		t.looking = false
		in.release(t)
		in.endRequests(t, requests.Exited)
		if r.end != nil {
			in.exited(t, r.end)
		}
		in.acc.CPUs(r.pid, t.cpus) // a process shorter than the metrics interval was read at its attach only
		in.noteIdle(t, p.readIdle(), p.ran(r.pid))
		in.acc.Forget(r.pid)
		delete(in.procs, r.pid)
		_ = probe.Trace(&p.bpf.ProfinferMaps, r.pid, false)
		if t.front > 0 {
			_ = probe.Front(&p.bpf.ProfinferMaps, t.front, r.pid, false)
		}
		in.effects = append(in.effects, effect{kind: gone, pid: r.pid})
		p.log.Info(r.why, zap.Int("pid", r.pid))
	}
	in.retiring = in.retiring[:0]
	p.post()
}

// workload names what process pid runs, for its windows' schedule (window.Add): its
// executable and its arguments; "" where they cannot be read.
func workload(pid int, exe string) string {
	args, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(args) == 0 {
		return ""
	}
	return exe + "\x00" + string(args)
}

// loadedToUse says whether a process that loaded the library of a backend, named as
// discover names it, is likely to compute on it from its first decode. RPC's is linked
// into every build made with it, whether a server is named or not: a process that uses
// one has its split probes once its scheduler is seen made with it, before its first
// decode, and its CPU graphs stand for their splits until they are placed.
func loadedToUse(backend string) bool { return backend != "rpc" }
