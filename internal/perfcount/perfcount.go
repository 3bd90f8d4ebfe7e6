// Package perfcount opens perf_event counters on the threads of traced processes, for the
// eBPF programs to read at node boundaries, and classifies nodes by what the hardware
// counters say. Hardware and software counters take the same path: only the event type
// differs, so the software ones prove the path on machines without a PMU.
package perfcount

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Counter is one perf event, named as perf(1) names it.
type Counter struct {
	Name   string
	Type   uint32
	Config uint64
}

// Hardware says whether the counter needs a PMU.
func (c Counter) Hardware() bool {
	return c.Type == unix.PERF_TYPE_HARDWARE || c.Type == unix.PERF_TYPE_RAW
}

// Key is the counter's name as an attribute key suffix: "task-clock" is "task_clock".
func (c Counter) Key() string { return strings.ReplaceAll(c.Name, "-", "_") }

type event struct {
	typ    uint32
	config uint64
}

var known = map[string]event{
	"cycles":                  {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES},
	"instructions":            {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_INSTRUCTIONS},
	"cache-references":        {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_REFERENCES},
	"cache-misses":            {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_MISSES},
	"branch-instructions":     {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
	"branch-misses":           {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_MISSES},
	"bus-cycles":              {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BUS_CYCLES},
	"stalled-cycles-frontend": {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
	"stalled-cycles-backend":  {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
	"ref-cycles":              {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_REF_CPU_CYCLES},
	"task-clock":              {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_TASK_CLOCK},
	"cpu-clock":               {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK},
	"page-faults":             {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS},
	"minor-faults":            {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS_MIN},
	"major-faults":            {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ},
	"context-switches":        {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CONTEXT_SWITCHES},
	"cpu-migrations":          {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_MIGRATIONS},
	"alignment-faults":        {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_ALIGNMENT_FAULTS},
	"emulation-faults":        {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_EMULATION_FAULTS},
}

// armEvents are ProfInfer's ARM PMU set beyond cycles and instructions: architected
// common events of PMUv3, named as perf lists them under an arm64 CPU's PMU. They are raw
// event numbers, which mean these events on arm64 alone. (perf's generic cache-misses is
// L1D_CACHE_REFILL there, not a last-level miss.)
var armEvents = map[string]uint64{
	"l1d_cache_refill": 0x03,
	"l2d_cache_refill": 0x17,
	"l3d_cache_refill": 0x2a,
	"ll_cache_miss_rd": 0x37,
	"stall_frontend":   0x23,
	"stall_backend":    0x24,
}

// names lists the counters Parse knows by name on arch, sorted.
func names(arch string) []string {
	names := make([]string, 0, len(known)+len(armEvents))
	for n := range known {
		names = append(names, n)
	}
	if arch == "arm64" {
		for n := range armEvents {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Parse reads a counter name: one of perf's generic names, on arm64 one of the ARM PMU
// events above, or a raw event code "rNNNN" in hex as perf takes it (for example r01c2).
func Parse(name string) (Counter, error) { return parse(name, runtime.GOARCH) }

func parse(name, arch string) (Counter, error) {
	if e, ok := known[name]; ok {
		return Counter{Name: name, Type: e.typ, Config: e.config}, nil
	}
	if code, ok := armEvents[name]; ok {
		if arch != "arm64" {
			return Counter{}, fmt.Errorf("perf counter %q is an ARM PMU event, and this machine is %s", name, arch)
		}
		return Counter{Name: name, Type: unix.PERF_TYPE_RAW, Config: code}, nil
	}
	if hex, ok := strings.CutPrefix(name, "r"); ok && hex != "" {
		if code, err := strconv.ParseUint(hex, 16, 64); err == nil {
			return Counter{Name: name, Type: unix.PERF_TYPE_RAW, Config: code}, nil
		}
	}
	return Counter{}, fmt.Errorf("unknown perf counter %q: want one of %s, or a raw event code such as r01c2",
		name, strings.Join(names(arch), ", "))
}

// open opens c counting on thread tid (0: the caller) on whichever CPU it runs.
func open(c Counter, tid int) (int, error) {
	attr := unix.PerfEventAttr{
		Type:   c.Type,
		Config: c.Config,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	return unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
}

// Detect opens each counter once on the calling thread and returns those that work, and
// for the others why not, as "name (reason)".
func Detect(cs []Counter) (ok []Counter, missing []string) {
	type failure struct {
		c   Counter
		err error
	}
	var failed []failure
	pmu := false // a hardware counter opened: the machine has a PMU
	for _, c := range cs {
		fd, err := open(c, 0)
		if err != nil {
			failed = append(failed, failure{c, err})
			continue
		}
		unix.Close(fd)
		ok = append(ok, c)
		pmu = pmu || c.Hardware()
	}
	for _, f := range failed {
		missing = append(missing, fmt.Sprintf("%s (%s)", f.c.Name, reason(f.c, f.err, pmu)))
	}
	return ok, missing
}

// reason says why c did not open; pmu says whether another hardware counter did, so that a
// PMU without this one event is not mistaken for no PMU.
func reason(c Counter, err error, pmu bool) string {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENODEV):
		switch {
		case c.Hardware() && pmu:
			return "this machine's PMU does not count this event: " + err.Error()
		case c.Hardware():
			return "no hardware PMU exposed to this machine: " + err.Error()
		}
		return "not supported by this kernel: " + err.Error()
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return "not permitted: needs root or CAP_PERFMON: " + err.Error()
	}
	return err.Error()
}
