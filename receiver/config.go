package receiver // import "github.com/profinfer/profinfer/receiver"

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/profiler"
	"github.com/profinfer/profinfer/internal/roofline"
)

// ErrorMode says what the receiver does when it cannot attach its probes to
// a target process.
type ErrorMode string

const (
	// ErrorModeIgnore logs attach errors and keeps serving the other targets.
	ErrorModeIgnore ErrorMode = "ignore"
	// ErrorModePropagate makes Start fail on the first attach error.
	ErrorModePropagate ErrorMode = "propagate"
)

const (
	defaultDiscoveryInterval  = time.Minute
	defaultCollectionInterval = 10 * time.Second
	defaultRingBufferSize     = 8 << 20 // 8 MiB
	minRingBufferSize         = 4096
	defaultTimerSlack         = 4 * time.Millisecond
	maxTimerSlack             = 100 * time.Millisecond
)

// Config defines the configuration of the profinfer receiver.
type Config struct {
	// Targets lists the processes to probe. Empty: discover every process
	// that maps a GGML CPU backend.
	Targets []TargetConfig `mapstructure:"targets"`
	// DiscoveryInterval is how often /proc is scanned in full for new and exited
	// targets. Kernel hooks report processes as they map code or exit, so the scan only
	// catches what they missed; where the hooks cannot attach, it is the only way in.
	// A scan reads every process's stat file, and its burst of system calls keeps the
	// Go runtime's monitor thread waking on the model's cores: a minute between scans
	// keeps that out of the default's cost.
	DiscoveryInterval time.Duration `mapstructure:"discovery_interval"`
	// CollectionInterval is the metrics export period.
	CollectionInterval time.Duration `mapstructure:"collection_interval"`
	// Nodes decides which graphs are traced node by node.
	Nodes NodesConfig `mapstructure:"nodes"`
	// Spans controls which spans are emitted.
	Spans SpansConfig `mapstructure:"spans"`
	// Roofline classifies nodes as memory-, compute- or overhead-bound.
	Roofline RooflineConfig `mapstructure:"roofline"`
	// Layers turns parts of the eBPF instrumentation off selectively.
	Layers LayersConfig `mapstructure:"layers"`
	// Counters lists perf counters to read on every thread at node boundaries, named
	// as perf(1) names them (task-clock, cycles, ...) or raw (r01c2); at most 8. Empty:
	// none. Those the machine lacks are dropped at start with one warning.
	Counters []string `mapstructure:"counters"`
	// RingBufferSize is the size of the eBPF ring buffer in bytes; it must be
	// a power of two of at least 4096.
	RingBufferSize int `mapstructure:"ring_buffer_size"`
	// ErrorMode is "ignore" (log attach errors and keep serving the other
	// targets) or "propagate" (Start fails).
	ErrorMode ErrorMode `mapstructure:"error_mode"`
	// TimerSlack is how late the kernel may fire the collector's timers, every thread's
	// (internal/timerslack): with the default 50 µs, the Go runtime's monitor wakes on
	// the model's cores every 70 µs while the collector works. The collector's process
	// is the receiver's: the setting is its, for every component in it. Threads other
	// than the one starting the receiver need CAP_SYS_NICE; 0 leaves the slack alone.
	TimerSlack time.Duration `mapstructure:"timer_slack"`

	metadata.MetricsBuilderConfig `mapstructure:",squash"`
}

// TargetConfig selects processes to probe: exactly one of PID or Executable.
type TargetConfig struct {
	// PID is a single running process.
	PID int `mapstructure:"pid"`
	// Executable is the absolute path of a binary; every process running it,
	// now and later, is probed.
	Executable string `mapstructure:"executable"`
}

// NodesConfig decides which graphs are traced node by node. Node probes are hit once
// per node on every thread, which is where almost all of profinfer's overhead is.
type NodesConfig struct {
	// Mode is "off" (decode and graph probes only), "sampled" (node probes attached in
	// windows) or "all" (node probes always attached: every node of every graph).
	Mode profiler.NodeMode `mapstructure:"mode"`
	// SampleInterval is, in sampled mode, the time from the end of one window to the
	// start of the next: a process's, or a command's run again (internal/window).
	SampleInterval time.Duration `mapstructure:"sample_interval"`
	// SampleGraphs is, in sampled mode, how many whole graphs each window traces.
	SampleGraphs int `mapstructure:"sample_graphs"`
	// Barriers adds a probe on ggml_barrier to split each thread's share of a node
	// into busy and waiting time.
	Barriers bool `mapstructure:"barriers"`
}

// RooflineConfig sets the roofline nodes are classified under.
type RooflineConfig struct {
	// Enabled turns classification on.
	Enabled bool `mapstructure:"enabled"`
	// PeakFLOPS is the machine's peak in floating-point operations per second, all
	// cores together; 0 measures it at start.
	PeakFLOPS float64 `mapstructure:"peak_flops"`
	// PeakBandwidth is the machine's peak memory bandwidth in bytes per second; 0
	// measures it at start.
	PeakBandwidth float64 `mapstructure:"peak_bandwidth"`
	// ProbeDuration is about how long the start-up measurement runs, on every CPU.
	ProbeDuration time.Duration `mapstructure:"probe_duration"`
	// StateFile keeps the best measured peaks of this machine across restarts, so that
	// a start beside a busy model need not measure; "" keeps none.
	StateFile string `mapstructure:"state_file"`
	// Remeasure measures again at each start that finds the CPUs idle, each roof keeping
	// the better of the new and the kept value; false uses the roofs the state file
	// keeps for this machine as they are, where they are final.
	Remeasure bool `mapstructure:"remeasure"`
}

// SpansConfig controls span emission.
type SpansConfig struct {
	// Nodes emits one span per computed graph node.
	Nodes bool `mapstructure:"nodes"`
	// SampleEvery emits spans for every Nth graph only; metrics still count
	// every node.
	SampleEvery int `mapstructure:"sample_every"`
}

// LayersConfig turns parts of the eBPF instrumentation off selectively.
type LayersConfig struct {
	// Application enables the llama_decode probes.
	Application bool `mapstructure:"application"`
	// Runtime enables the graph and node probes.
	Runtime bool `mapstructure:"runtime"`
	// Scheduler follows the traced threads through sched_switch and sched_wakeup:
	// off-CPU time, run-queue wait, preemptions and migrations per node.
	Scheduler bool `mapstructure:"scheduler"`
	// Connections follows the traced servers' connections through their socket calls:
	// when each request arrived, and so how long it waited for a slot.
	Connections bool `mapstructure:"connections"`
}

var _ confmap.Validator = (*Config)(nil)

func createDefaultConfig() component.Config {
	return &Config{
		DiscoveryInterval:    defaultDiscoveryInterval,
		CollectionInterval:   defaultCollectionInterval,
		Nodes:                NodesConfig{Mode: profiler.NodesSampled, SampleInterval: 10 * time.Second, SampleGraphs: 1},
		Spans:                SpansConfig{Nodes: true, SampleEvery: 1},
		Roofline:             RooflineConfig{Enabled: true, ProbeDuration: roofline.DefaultProbe, StateFile: roofline.DefaultStateFile, Remeasure: true},
		Layers:               LayersConfig{Application: true, Runtime: true, Connections: true},
		RingBufferSize:       defaultRingBufferSize,
		ErrorMode:            ErrorModeIgnore,
		TimerSlack:           defaultTimerSlack,
		MetricsBuilderConfig: metadata.DefaultMetricsBuilderConfig(),
	}
}

// Validate checks the receiver configuration and reports every problem.
func (c *Config) Validate() error {
	var errs error
	for i, t := range c.Targets {
		switch {
		case (t.PID != 0) == (t.Executable != ""):
			errs = errors.Join(errs, fmt.Errorf("targets[%d]: exactly one of pid or executable must be set", i))
		case t.PID < 0:
			errs = errors.Join(errs, fmt.Errorf("targets[%d]: pid must be positive, got %d", i, t.PID))
		case t.Executable != "" && !filepath.IsAbs(t.Executable):
			errs = errors.Join(errs, fmt.Errorf("targets[%d]: executable must be an absolute path, got %q", i, t.Executable))
		}
	}
	if c.DiscoveryInterval <= 0 {
		errs = errors.Join(errs, fmt.Errorf("discovery_interval must be positive, got %s", c.DiscoveryInterval))
	}
	if c.CollectionInterval <= 0 {
		errs = errors.Join(errs, fmt.Errorf("collection_interval must be positive, got %s", c.CollectionInterval))
	}
	switch c.Nodes.Mode {
	case profiler.NodesOff, profiler.NodesAll:
	case profiler.NodesSampled:
		if c.Nodes.SampleInterval <= 0 {
			errs = errors.Join(errs, fmt.Errorf("nodes.sample_interval must be positive, got %s", c.Nodes.SampleInterval))
		}
		if c.Nodes.SampleGraphs < 1 {
			errs = errors.Join(errs, fmt.Errorf("nodes.sample_graphs must be at least 1, got %d", c.Nodes.SampleGraphs))
		}
	default:
		errs = errors.Join(errs, fmt.Errorf("nodes.mode must be %q, %q or %q, got %q", profiler.NodesOff, profiler.NodesSampled, profiler.NodesAll, c.Nodes.Mode))
	}
	if c.Spans.SampleEvery < 1 {
		errs = errors.Join(errs, fmt.Errorf("spans.sample_every must be at least 1, got %d", c.Spans.SampleEvery))
	}
	if c.Roofline.PeakFLOPS < 0 || c.Roofline.PeakBandwidth < 0 {
		errs = errors.Join(errs, fmt.Errorf("roofline: peak_flops and peak_bandwidth must not be negative, got %g and %g",
			c.Roofline.PeakFLOPS, c.Roofline.PeakBandwidth))
	}
	if c.Roofline.Enabled && (c.Roofline.PeakFLOPS == 0 || c.Roofline.PeakBandwidth == 0) && c.Roofline.ProbeDuration <= 0 {
		errs = errors.Join(errs, fmt.Errorf("roofline.probe_duration must be positive to measure the peaks, got %s", c.Roofline.ProbeDuration))
	}
	if f := c.Roofline.StateFile; f != "" && !filepath.IsAbs(f) {
		errs = errors.Join(errs, fmt.Errorf("roofline.state_file must be an absolute path, got %q", f))
	}
	if n := c.RingBufferSize; n < minRingBufferSize || n&(n-1) != 0 {
		errs = errors.Join(errs, fmt.Errorf("ring_buffer_size must be a power of two of at least 4096 bytes, got %d", n))
	}
	if c.ErrorMode != ErrorModeIgnore && c.ErrorMode != ErrorModePropagate {
		errs = errors.Join(errs, fmt.Errorf("error_mode must be %q or %q, got %q", ErrorModeIgnore, ErrorModePropagate, c.ErrorMode))
	}
	if c.TimerSlack < 0 || c.TimerSlack > maxTimerSlack {
		errs = errors.Join(errs, fmt.Errorf("timer_slack must be between 0 (left alone) and %s, got %s", maxTimerSlack, c.TimerSlack))
	}
	if len(c.Counters) > perfcount.PerThread {
		errs = errors.Join(errs, fmt.Errorf("counters: at most %d, got %d", perfcount.PerThread, len(c.Counters)))
	}
	seen := map[string]bool{}
	for i, name := range c.Counters {
		if _, err := perfcount.Parse(name); err != nil {
			errs = errors.Join(errs, fmt.Errorf("counters[%d]: %w", i, err))
		} else if seen[name] {
			errs = errors.Join(errs, fmt.Errorf("counters[%d]: %s is listed twice", i, name))
		}
		seen[name] = true
	}
	if !c.Layers.Application && !c.Layers.Runtime {
		errs = errors.Join(errs, errors.New("layers: at least one of application or runtime must be enabled"))
	}
	return errs
}
