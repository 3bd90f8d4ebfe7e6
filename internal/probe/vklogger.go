package probe

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cilium/ebpf"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/symbols"
)

// LoggerState says whether a process's ggml-vulkan times its nodes with its perf logger.
type LoggerState int

const (
	LoggerOff        LoggerState = iota // GGML_VK_PERF_LOGGER unset: the device's nodes are untimed
	LoggerNodes                         // a time per node: read
	LoggerConcurrent                    // GGML_VK_PERF_LOGGER_CONCURRENT: a time per group of nodes, not read
)

// ggml-vulkan's perf logger: the flags it reads from the environment once, when the
// backend starts, and the functions that label a node and print the labels' times. The
// print is split by the compiler: the callers check the print frequency inline and call
// the clone that prints, which is the one to probe where it exists.
const (
	loggerEnabled    = "vk_perf_logger_enabled"
	loggerConcurrent = "vk_perf_logger_concurrent"
	loggerLabel      = "_ZN14vk_perf_logger20get_node_fusion_nameB5cxx11EPK11ggml_tensorPKcPm"
	loggerPrint      = "_ZN14vk_perf_logger13print_timingsEb"
)

var loggerPrints = []string{loggerPrint + ".part.0", loggerPrint}

// attachLogger probes ggml-vulkan's perf logger in dev (parsed as f) where the process
// has it on, timing single nodes. It reads the logger's flags from the process's memory,
// which the backend sets as it starts: before its first split, where AttachDevice reads
// them again if they were read earlier.
func (a *Attachment) attachLogger(dev *discover.Module, f *symbols.File) error {
	if a.progs.TimesPrint == nil {
		return nil // no bpf_loop: the labels' times cannot be walked (see Kernel)
	}
	state, err := a.loggerState(dev, f)
	if a.Logger = state; err != nil || state != LoggerNodes {
		return err
	}
	label, print, ok := loggerFunctions(f)
	if !ok {
		return fmt.Errorf("pid %d: GGML_VK_PERF_LOGGER is on, but %s has no %s or %s: the device's own node times are not read", a.PID, dev.Path, loggerLabel, loggerPrint)
	}
	var links Links
	for _, p := range []struct {
		sym  symbols.Symbol
		prog *ebpf.Program
		ret  bool
		keep symbols.Regs
	}{
		{label, a.progs.LabelEnter, false, symbols.Arg1 | symbols.Arg3},
		{label, a.progs.LabelExit, true, 0},
		{print, a.progs.TimesPrint, false, symbols.Arg1},
	} {
		l, err := a.placeAt(dev, f, p.sym, p.prog, p.ret, p.keep, p.sym.Name)
		if err != nil {
			closeAll(links)
			a.Logger = LoggerOff
			return err
		}
		links = append(links, l)
	}
	a.links = append(a.links, links...)
	return nil
}

// loggerFunctions finds where the logger labels a node and prints the labels' times.
func loggerFunctions(f *symbols.File) (label, print symbols.Symbol, ok bool) {
	if label, ok = f.Function(loggerLabel); !ok {
		return
	}
	for _, n := range loggerPrints {
		if print, ok = f.Function(n); ok {
			return
		}
	}
	return
}

// loggerState reads the logger's flags, one byte each, from the process's memory.
func (a *Attachment) loggerState(dev *discover.Module, f *symbols.File) (LoggerState, error) {
	on, ok := f.Symbol(loggerEnabled)
	conc, ok2 := f.Symbol(loggerConcurrent)
	if !ok || !ok2 {
		return LoggerOff, nil // a ggml-vulkan without the logger, or stripped
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(a.PID) + "/mem")
	if err != nil {
		return LoggerOff, fmt.Errorf("reading whether ggml-vulkan's perf logger is on: %w", err)
	}
	defer mem.Close()
	var b [1]byte
	read := func(s symbols.Symbol) (bool, error) {
		_, err := mem.ReadAt(b[:], int64(s.Value+dev.Bias))
		return b[0] != 0, err
	}
	enabled, err := read(on)
	concurrent, err2 := read(conc)
	if err = errors.Join(err, err2); err != nil {
		return LoggerOff, fmt.Errorf("reading whether ggml-vulkan's perf logger is on: %w", err)
	}
	switch {
	case !enabled:
		return LoggerOff, nil
	case concurrent:
		return LoggerConcurrent, nil
	}
	return LoggerNodes, nil
}
