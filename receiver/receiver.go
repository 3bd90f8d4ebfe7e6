package receiver // import "github.com/profinfer/profinfer/receiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
)

// profinferReceiver is a placeholder with the final API; the real
// implementation replaces this file.
type profinferReceiver struct {
	set     receiver.Settings
	cfg     *Config
	traces  consumer.Traces
	metrics consumer.Metrics
}

func newProfinferReceiver(set receiver.Settings, cfg *Config) *profinferReceiver {
	return &profinferReceiver{set: set, cfg: cfg}
}

func (r *profinferReceiver) setTraces(next consumer.Traces) { r.traces = next }

func (r *profinferReceiver) setMetrics(next consumer.Metrics) { r.metrics = next }

func (r *profinferReceiver) Start(context.Context, component.Host) error { return nil }

func (r *profinferReceiver) Shutdown(context.Context) error { return nil }
