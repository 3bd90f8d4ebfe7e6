package receiver // import "github.com/profinfer/profinfer/receiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/profiler"
	"github.com/profinfer/profinfer/internal/roofline"
)

// profinferReceiver serves one configuration's traces and metrics pipelines from a single
// profiler, so that the probes are attached once whichever pipelines use it.
type profinferReceiver struct {
	set      receiver.Settings
	cfg      *Config
	traces   consumer.Traces
	metrics  consumer.Metrics
	profiler *profiler.Profiler
}

func newProfinferReceiver(set receiver.Settings, cfg *Config) *profinferReceiver {
	return &profinferReceiver{set: set, cfg: cfg}
}

func (r *profinferReceiver) setTraces(next consumer.Traces) { r.traces = next }

func (r *profinferReceiver) setMetrics(next consumer.Metrics) { r.metrics = next }

// Start attaches to the configured targets and starts profiling.
func (r *profinferReceiver) Start(ctx context.Context, _ component.Host) error {
	r.profiler = profiler.New(r.profilerConfig(), r.set, r.traces, r.metrics)
	return r.profiler.Start(ctx)
}

// Shutdown detaches every probe and flushes what was assembled.
func (r *profinferReceiver) Shutdown(ctx context.Context) error {
	if r.profiler == nil {
		return nil
	}
	return r.profiler.Shutdown(ctx)
}

func (r *profinferReceiver) profilerConfig() profiler.Config {
	c := r.cfg
	pc := profiler.Config{
		DiscoveryInterval:  c.DiscoveryInterval,
		CollectionInterval: c.CollectionInterval,
		Nodes:              profiler.Nodes{Mode: c.Nodes.Mode, Interval: c.Nodes.SampleInterval, Graphs: c.Nodes.SampleGraphs},
		NodeSpans:          c.Spans.Nodes,
		SampleEvery:        c.Spans.SampleEvery,
		RingBufferSize:     c.RingBufferSize,
		Layers: probe.Layers{Application: c.Layers.Application, Runtime: c.Layers.Runtime, Barriers: c.Nodes.Barriers,
			Scheduler: c.Layers.Scheduler, Connections: c.Layers.Connections},
		Propagate:  c.ErrorMode == ErrorModePropagate,
		TimerSlack: c.TimerSlack,
		Metrics:    c.MetricsBuilderConfig,
		Roofline: profiler.Roofline{Enabled: c.Roofline.Enabled, Probe: c.Roofline.ProbeDuration, StateFile: c.Roofline.StateFile,
			KeepFinal: !c.Roofline.Remeasure, Peaks: roofline.Peaks{FLOPS: c.Roofline.PeakFLOPS, Bandwidth: c.Roofline.PeakBandwidth}},
	}
	for _, t := range c.Targets {
		pc.Targets = append(pc.Targets, profiler.Selector{PID: t.PID, Executable: t.Executable})
	}
	for _, name := range c.Counters {
		if ctr, err := perfcount.Parse(name); err == nil { // Validate reported the others
			pc.Counters = append(pc.Counters, ctr)
		}
	}
	return pc
}
