package receiver // import "github.com/profinfer/profinfer/receiver"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/profinfer/profinfer/internal/metadata"
)

// NewFactory returns the factory of the profinfer receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithTraces(createTraces, metadata.TracesStability),
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	return receivers.getOrCreate(set, cfg.(*Config), func(r *profinferReceiver) { r.setTraces(next) }), nil
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return receivers.getOrCreate(set, cfg.(*Config), func(r *profinferReceiver) { r.setMetrics(next) }), nil
}

// receivers holds one receiver per *Config, so that the traces and metrics
// pipelines of one `profinfer` entry share a single set of probes (what
// contrib's sharedcomponent does). An entry lives until its Shutdown.
var receivers = &sharedReceivers{byConfig: map[*Config]*sharedReceiver{}}

type sharedReceivers struct {
	mu       sync.Mutex
	byConfig map[*Config]*sharedReceiver
}

func (s *sharedReceivers) getOrCreate(set receiver.Settings, cfg *Config, attach func(*profinferReceiver)) *sharedReceiver {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr, ok := s.byConfig[cfg]
	if !ok {
		sr = &sharedReceiver{profinferReceiver: newProfinferReceiver(set, cfg), owner: s, cfg: cfg}
		s.byConfig[cfg] = sr
	}
	attach(sr.profinferReceiver)
	return sr
}

func (s *sharedReceivers) remove(cfg *Config, sr *sharedReceiver) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byConfig[cfg] == sr {
		delete(s.byConfig, cfg)
	}
}

// sharedReceiver is what both pipelines get: Start and Shutdown run the
// underlying receiver's once, however many pipelines call them, and Shutdown
// forgets the entry so that a later create starts afresh.
type sharedReceiver struct {
	*profinferReceiver
	owner *sharedReceivers
	cfg   *Config

	startOnce    sync.Once
	startErr     error
	shutdownOnce sync.Once
	shutdownErr  error
}

func (sr *sharedReceiver) Start(ctx context.Context, host component.Host) error {
	sr.startOnce.Do(func() {
		sr.startErr = sr.profinferReceiver.Start(ctx, host)
	})
	return sr.startErr
}

func (sr *sharedReceiver) Shutdown(ctx context.Context) error {
	sr.shutdownOnce.Do(func() {
		sr.owner.remove(sr.cfg, sr)
		sr.shutdownErr = sr.profinferReceiver.Shutdown(ctx)
	})
	return sr.shutdownErr
}
