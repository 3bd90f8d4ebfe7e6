package receiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/profinfer/profinfer/internal/metadata"
)

func TestFactoryType(t *testing.T) {
	assert.Equal(t, "profinfer", NewFactory().Type().String())
	assert.Equal(t, metadata.Type, NewFactory().Type())
}

func TestFactoryStability(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.TracesStability, f.TracesStability())
	assert.Equal(t, metadata.MetricsStability, f.MetricsStability())
}

func TestDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, createDefaultConfig(), cfg)
}

func TestSharedReceiver(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig()
	set := receivertest.NewNopSettings(metadata.Type)

	traces, err := f.CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	metrics, err := f.CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)

	require.IsType(t, &sharedReceiver{}, traces)
	require.Same(t, traces, metrics)
	r := traces.(*sharedReceiver).profinferReceiver
	assert.Same(t, r, metrics.(*sharedReceiver).profinferReceiver)

	// Another config gets its own receiver.
	other, err := f.CreateMetrics(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.NotSame(t, r, other.(*sharedReceiver).profinferReceiver)
	require.NoError(t, other.Shutdown(context.Background()))

	// Shutdown is idempotent across both pipelines and forgets the entry.
	require.NoError(t, traces.Shutdown(context.Background()))
	require.NoError(t, metrics.Shutdown(context.Background()))
	receivers.mu.Lock()
	_, ok := receivers.byConfig[cfg.(*Config)]
	receivers.mu.Unlock()
	assert.False(t, ok)

	again, err := f.CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	assert.NotSame(t, r, again.(*sharedReceiver).profinferReceiver)
	require.NoError(t, again.Shutdown(context.Background()))
}
