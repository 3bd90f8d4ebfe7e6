package registry

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/container"
	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/runtimes"
	"github.com/profinfer/profinfer/internal/symbols"
)

// Found is a GGML process that profinfer can profile, as its inspection found it.
type Found struct {
	Proc   *discover.Process
	Target *ggml.Target
	// Context says where its llama_context keeps its size and threads: nil without
	// libllama or the application layer, or when the getters are not plain loads.
	Context *ggml.Context
	BuildID string
	// Build is the llama.cpp build it runs, where an object it maps records it.
	Build ggml.Build
	// Container is the id of the container it runs in, from its cgroup; "" outside any.
	Container string
	// Runtime is its runtime, chosen by what Process says of it: the symbols it has, its
	// arguments and the executable of the process that started it.
	Runtime *runtimes.Runtime
	Process runtimes.Process
	// Whisper says where its whisper_context keeps the model's hyperparameters: nil
	// without whisper.cpp or the application layer, or when its getters are not plain loads.
	Whisper *runtimes.WhisperFields
}

// Refusal is a GGML process profinfer cannot profile: never a silent skip.
type Refusal struct {
	Reason metadata.AttributeProfinferAttachReason
	Exe    string
	Err    error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// Refuse returns the refusal of a GGML process running exe, for reason.
func Refuse(reason metadata.AttributeProfinferAttachReason, exe string, err error) error {
	return &Refusal{Reason: reason, Exe: exe, Err: err}
}

var (
	errIdle     = errors.New("not profiled")
	errNotGGML  = errors.New("maps no GGML CPU backend")
	errStripped = errors.New("stripped of its symbol table")
	errVanished = errors.New("gone before it could be profiled")
)

// proc is where process pid's files are, under the registry's /proc.
func (r *Registry) proc(pid int, sub ...string) string {
	return filepath.Join(append([]string{r.cfg.Root, strconv.Itoa(pid)}, sub...)...)
}

// inspectGGML inspects process pid, and says whether it found GGML's base and CPU backend
// mapped there: a process found to unmap them meanwhile is gone, not refused.
func (r *Registry) inspectGGML(pid int) (f *Found, mapped bool, err error) {
	proc, err := discover.Inspect(r.fs, r.cfg.Root, pid, r.Files.Classify)
	if err != nil {
		return nil, false, fmt.Errorf("pid %d: %w", pid, err)
	}
	if proc == nil {
		return nil, false, r.notGGML(pid)
	}
	// A runtime's process that computes no model is let be, after this look alone.
	rp := runtimes.Process{Process: proc, Args: r.args(pid)}
	rp.Parent, rp.ParentPID = r.parent(pid)
	rt, idle := runtimes.Of(rp)
	if rt == nil {
		return nil, false, fmt.Errorf("pid %d (%s) is %s: %w", pid, proc.Exe, idle, errIdle)
	}
	// From here on the process is GGML: whatever stops it is a refusal, said and counted.
	base := proc.Module(discover.Base)
	if base == nil {
		return nil, false, Refuse(metadata.AttributeProfinferAttachReasonOther, proc.Exe, fmt.Errorf(
			"pid %d (%s): no object defines ggml_tensor_overhead: GGML's base library is not mapped", pid, proc.Exe))
	}
	bf, err := r.Files.Open(base)
	if err != nil {
		return nil, true, Refuse(metadata.AttributeProfinferAttachReasonOther, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	cpu := proc.Module(discover.CPU)
	if cpu == nil {
		return nil, false, r.notGGML(pid) // a CPU backend may still come, with dlopen
	}
	cf, err := r.Files.Open(cpu)
	if err != nil {
		return nil, true, Refuse(metadata.AttributeProfinferAttachReasonOther, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	if _, ok := probe.NodeSymbol(cf); !ok {
		return nil, true, Refuse(metadata.AttributeProfinferAttachReasonNoNodeProbe, proc.Exe, fmt.Errorf(
			"pid %d (%s): its CPU backend, %s, defines none of %s to probe nodes with",
			pid, proc.Exe, cpu.Path, strings.Join(probe.NodeSymbols, ", ")))
	}
	mem, err := os.Open(r.proc(pid, "mem"))
	if err != nil {
		return nil, true, Refuse(metadata.AttributeProfinferAttachReasonNoAccess, proc.Exe, fmt.Errorf("pid %d (%s): reading its memory: %w", pid, proc.Exe, err))
	}
	defer mem.Close()
	target, err := ggml.Inspect(bf, mem, base.Bias)
	if errors.Is(err, ggml.ErrNotRelocated) {
		return nil, false, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err)
	}
	if err != nil {
		return nil, true, Refuse(metadata.AttributeProfinferAttachReasonUnsupportedLayout, proc.Exe, fmt.Errorf("pid %d (%s): %w", pid, proc.Exe, err))
	}
	var ctx *ggml.Context
	if rt != runtimes.OllamaEngine { // its llama_decode is its other runner's
		ctx = r.contextFields(proc)
	}
	return &Found{Proc: proc, Target: target, Context: ctx, Whisper: r.whisperFields(proc), Runtime: rt, Process: rp,
		BuildID: symbols.BuildIDOf(r.proc(pid, "exe")), Build: r.build(proc, mem), Container: container.Of(r.cfg.Root, pid)}, true, nil
}

// build reads the llama.cpp build that proc runs, whose memory is mem, from the object
// that records it; what it could not read is left unknown, and said.
func (r *Registry) build(proc *discover.Process, mem io.ReaderAt) ggml.Build {
	m := proc.Build
	if m == nil {
		return ggml.Build{}
	}
	f, err := r.Files.Open(m)
	var b ggml.Build
	if err == nil {
		b, err = ggml.ReadBuild(f, mem, m.Bias)
	}
	if err != nil {
		r.log.Warn("llama.cpp's build number or commit not reported", zap.Int("pid", proc.PID), zap.Error(err))
	}
	return b
}

// parent returns the executable of the process that started process pid, and its pid;
// "" and 0 where they cannot be read.
func (r *Registry) parent(pid int) (exe string, ppid int) {
	proc, err := r.fs.Proc(pid)
	if err != nil {
		return "", 0
	}
	st, err := proc.Stat()
	if err != nil {
		return "", 0
	}
	pp, err := r.fs.Proc(st.PPID)
	if err != nil {
		return "", st.PPID
	}
	exe, _ = discover.Executable(pp)
	return exe, st.PPID
}

// args returns the arguments of process pid; nil where they cannot be read.
func (r *Registry) args(pid int) []string {
	proc, err := r.fs.Proc(pid)
	if err != nil {
		return nil
	}
	args, _ := proc.CmdLine()
	return args
}

// whisperFields finds where proc's whisper_context keeps its model's hyperparameters; nil
// without whisper.cpp or the application layer.
func (r *Registry) whisperFields(proc *discover.Process) *runtimes.WhisperFields {
	m := proc.Module(discover.Whisper)
	if m == nil || !r.cfg.Application {
		return nil
	}
	f, err := r.Files.Open(m)
	if err != nil {
		return nil
	}
	w, err := runtimes.WhisperFieldsIn(f)
	if err != nil {
		r.log.Warn("whisper model not reported", zap.Int("pid", proc.PID), zap.Error(err))
		return nil
	}
	return w
}

// notGGML says why process pid, which maps no GGML CPU backend, cannot be profiled. Its
// executable may be a static GGML build that was stripped: that is told apart (by
// reading its read-only data) when the configuration names targets, or when the
// executable's name says llama or ggml, so that discovery does not read every program.
func (r *Registry) notGGML(pid int) error {
	exe, _ := os.Readlink(r.proc(pid, "exe"))
	base := filepath.Base(exe)
	if (len(r.cfg.Targets) > 0 || strings.Contains(base, "llama") || strings.Contains(base, "ggml")) &&
		symbols.StrippedGGML(r.proc(pid, "exe")) {
		return Refuse(metadata.AttributeProfinferAttachReasonStripped, exe, fmt.Errorf(
			"pid %d: %s is a GGML build %w: it defines none of %s; profile an unstripped build",
			pid, exe, errStripped, strings.Join(discover.RoleSymbol[:], ", ")))
	}
	return fmt.Errorf("pid %d is not a GGML process: it %w", pid, errNotGGML)
}

// Vanished says whether process pid is gone, or maps no GGML base or CPU backend now.
func (r *Registry) Vanished(pid int) bool {
	proc, err := discover.Inspect(r.fs, r.cfg.Root, pid, r.Files.Classify)
	return err != nil || proc == nil || proc.Module(discover.Base) == nil || proc.Module(discover.CPU) == nil
}

// contextFields finds where proc's llama_context keeps its size and threads; nil
// without libllama or the application layer, or when its getters are not plain loads.
func (r *Registry) contextFields(proc *discover.Process) *ggml.Context {
	m := proc.Module(discover.Llama)
	if m == nil || !r.cfg.Application {
		return nil
	}
	lf, err := r.Files.Open(m)
	if err != nil {
		return nil
	}
	c, err := ggml.ContextIn(lf)
	if err != nil {
		r.log.Warn("context size and threads not reported", zap.Int("pid", proc.PID), zap.Error(err))
		return nil
	}
	return &c
}
