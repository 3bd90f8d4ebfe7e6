package profiler

import (
	"time"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/registry"
	"github.com/profinfer/profinfer/internal/roofline"
)

// Selector selects processes: by PID, or every process running Executable.
type Selector = registry.Selector

// NodeMode says when the node probes are attached; its values are the configuration's
// nodes.mode.
type NodeMode string

const (
	NodesOff     NodeMode = "off"     // never: decode and graph probes only
	NodesSampled NodeMode = "sampled" // in windows of Nodes.Graphs graphs, every Nodes.Interval
	NodesAll     NodeMode = "all"     // always: every node of every graph
)

// Nodes decides which graphs are traced node by node.
type Nodes struct {
	Mode     NodeMode
	Interval time.Duration // NodesSampled: from the end of one window to the next
	Graphs   int           // NodesSampled: traced graphs per window
}

// Config is what the receiver's configuration decides.
type Config struct {
	Targets            []Selector // empty: every process that maps a GGML CPU backend
	DiscoveryInterval  time.Duration
	CollectionInterval time.Duration
	Nodes              Nodes
	NodeSpans          bool
	SampleEvery        int // spans for every Nth graph-bearing decode
	RingBufferSize     int
	Layers             probe.Layers
	Propagate          bool          // fail Start on the first target error
	TimerSlack         time.Duration // the process's threads' timer slack; 0: left alone
	Metrics            metadata.MetricsBuilderConfig
	Roofline           Roofline
	// Counters are read on every thread at node boundaries; those the machine lacks are
	// dropped at start with a warning.
	Counters []perfcount.Counter
}

// sampled says whether node probes come and go in windows.
func (c *Config) sampled() bool { return c.Nodes.Mode == NodesSampled && c.Layers.Runtime }

// Roofline decides how nodes are classified: under Peaks, whose zero fields are
// measured at start for at most Probe, or kept from an earlier start in StateFile.
type Roofline struct {
	Enabled   bool
	Peaks     roofline.Peaks
	Probe     time.Duration
	StateFile string
	KeepFinal bool // final roofs kept are not measured again
}
