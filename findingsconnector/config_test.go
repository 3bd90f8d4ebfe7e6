package findingsconnector

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

// A configuration turns the generated metrics and event off by their names, beside the
// interval; a bad interval is refused naming it.
func TestConfig(t *testing.T) {
	cm := confmap.NewFromStringMap(map[string]any{
		"interval": "30s",
		"metrics":  map[string]any{"profinfer.finding.gain": map[string]any{"enabled": false}},
		"events":   map[string]any{"profinfer.finding": map[string]any{"enabled": false}},
	})
	cfg := createDefaultConfig()
	if err := cm.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Interval != 30*time.Second || cfg.Metrics.ProfinferFindingGain.Enabled || !cfg.Metrics.ProfinferFinding.Enabled || cfg.Events.ProfinferFinding.Enabled {
		t.Errorf("config %+v", cfg)
	}
	cfg.Interval = 0
	if err := cfg.Validate(); err == nil || err.Error() != "interval: must be above zero" {
		t.Errorf("interval 0: %v", err)
	}
}
