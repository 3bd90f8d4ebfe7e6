package receiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/profiler"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()

	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	customMetrics := metadata.DefaultMetricsBuilderConfig()
	customMetrics.Metrics.GgmlOpCount.Enabled = false
	customMetrics.ResourceAttributes.ProcessVpid.Enabled = false

	smallestRingBuffer := createDefaultConfig().(*Config)
	smallestRingBuffer.RingBufferSize = 4096

	tests := []struct {
		id          component.ID
		expected    component.Config
		expectedErr string
	}{
		{
			id:       component.NewID(metadata.Type),
			expected: createDefaultConfig(),
		},
		{
			id: component.NewIDWithName(metadata.Type, "custom"),
			expected: &Config{
				Targets: []TargetConfig{
					{PID: 4242},
					{Executable: "/opt/llama.cpp/bin/llama-server"},
				},
				DiscoveryInterval:    time.Second,
				CollectionInterval:   30 * time.Second,
				Nodes:                NodesConfig{Mode: profiler.NodesAll, SampleInterval: 10 * time.Second, SampleGraphs: 1, Barriers: true},
				Spans:                SpansConfig{Nodes: false, SampleEvery: 8},
				Roofline:             RooflineConfig{Enabled: true, PeakFLOPS: 1.5e11, PeakBandwidth: 2.5e10, ProbeDuration: 400 * time.Millisecond},
				Layers:               LayersConfig{Application: false, Runtime: true, Scheduler: true, Connections: true},
				Counters:             []string{"task-clock", "cycles", "r01c2"},
				RingBufferSize:       32 << 20,
				ErrorMode:            ErrorModePropagate,
				MetricsBuilderConfig: customMetrics,
			},
		},
		{
			id:       component.NewIDWithName(metadata.Type, "smallest_ring_buffer"),
			expected: smallestRingBuffer,
		},
		{
			id:          component.NewIDWithName(metadata.Type, "target_pid_and_executable"),
			expectedErr: "targets[0]: exactly one of pid or executable must be set",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "target_empty"),
			expectedErr: "targets[1]: exactly one of pid or executable must be set",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "target_negative_pid"),
			expectedErr: "targets[0]: pid must be positive, got -7",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "target_relative_executable"),
			expectedErr: `targets[0]: executable must be an absolute path, got "bin/llama-server"`,
		},
		{
			id:          component.NewIDWithName(metadata.Type, "zero_discovery_interval"),
			expectedErr: "discovery_interval must be positive, got 0s",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "negative_collection_interval"),
			expectedErr: "collection_interval must be positive, got -5s",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "zero_sample_every"),
			expectedErr: "spans.sample_every must be at least 1, got 0",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "ring_buffer_not_power_of_two"),
			expectedErr: "ring_buffer_size must be a power of two of at least 4096 bytes, got 12288",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "ring_buffer_too_small"),
			expectedErr: "ring_buffer_size must be a power of two of at least 4096 bytes, got 2048",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "bad_error_mode"),
			expectedErr: `error_mode must be "ignore" or "propagate", got "panic"`,
		},
		{
			id:          component.NewIDWithName(metadata.Type, "negative_timer_slack"),
			expectedErr: "timer_slack must be between 0 (left alone) and 100ms, got -1ms",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "long_timer_slack"),
			expectedErr: "timer_slack must be between 0 (left alone) and 100ms, got 1s",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "bad_node_mode"),
			expectedErr: `nodes.mode must be "off", "sampled" or "all", got "every"`,
		},
		{
			id: component.NewIDWithName(metadata.Type, "bad_node_sampling"),
			expectedErr: "nodes.sample_interval must be positive, got 0s\n" +
				"nodes.sample_graphs must be at least 1, got 0",
		},
		{
			id: component.NewIDWithName(metadata.Type, "bad_roofline"),
			expectedErr: "roofline: peak_flops and peak_bandwidth must not be negative, got -1 and 0\n" +
				"roofline.probe_duration must be positive to measure the peaks, got 0s",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "relative_roofline_state_file"),
			expectedErr: `roofline.state_file must be an absolute path, got "roofline.json"`,
		},
		{
			id: component.NewIDWithName(metadata.Type, "bad_counters"),
			expectedErr: "counters[1]: unknown perf counter \"cycels\": want one of alignment-faults, branch-instructions, " +
				"branch-misses, bus-cycles, cache-misses, cache-references, context-switches, cpu-clock, cpu-migrations, " +
				"cycles, emulation-faults, instructions, major-faults, minor-faults, page-faults, ref-cycles, " +
				"stalled-cycles-backend, stalled-cycles-frontend, task-clock, or a raw event code such as r01c2\n" +
				"counters[2]: task-clock is listed twice",
		},
		{
			id:          component.NewIDWithName(metadata.Type, "no_layers"),
			expectedErr: "layers: at least one of application or runtime must be enabled",
		},
		{
			id: component.NewIDWithName(metadata.Type, "many_errors"),
			expectedErr: "targets[0]: exactly one of pid or executable must be set\n" +
				"discovery_interval must be positive, got -1s\n" +
				"spans.sample_every must be at least 1, got -2",
		},
	}

	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			t.Parallel()

			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))

			if tt.expectedErr != "" {
				assert.EqualError(t, confmap.Validate(cfg), tt.expectedErr)
				return
			}
			assert.NoError(t, confmap.Validate(cfg))
			if diff := cmp.Diff(tt.expected, cfg,
				cmpopts.IgnoreUnexported(metadata.MetricConfig{}, metadata.ResourceAttributeConfig{})); diff != "" {
				t.Errorf("config mismatch (-expected +actual):\n%s", diff)
			}
		})
	}
}

func TestValidateZeroConfig(t *testing.T) {
	t.Parallel()

	assert.EqualError(t, (&Config{}).Validate(),
		"discovery_interval must be positive, got 0s\n"+
			"collection_interval must be positive, got 0s\n"+
			`nodes.mode must be "off", "sampled" or "all", got ""`+"\n"+
			"spans.sample_every must be at least 1, got 0\n"+
			"ring_buffer_size must be a power of two of at least 4096 bytes, got 0\n"+
			`error_mode must be "ignore" or "propagate", got ""`+"\n"+
			"layers: at least one of application or runtime must be enabled")
}
