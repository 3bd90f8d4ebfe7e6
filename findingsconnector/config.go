package findingsconnector // import "github.com/profinfer/profinfer/findingsconnector"

import (
	"errors"
	"time"

	"github.com/profinfer/profinfer/findingsconnector/internal/metadata"
)

// Config is the profinferfindings connector's configuration.
type Config struct {
	// Interval is how often the findings are judged, at the metrics that come in: the
	// receiver sends each process's metrics every collection interval, and its last at
	// its exit.
	Interval time.Duration `mapstructure:"interval"`
	// Metrics and events: each of the connector's metrics and its log record, on or off,
	// as documentation.md lists them.
	metadata.MetricsBuilderConfig `mapstructure:",squash"`
	metadata.LogsBuilderConfig    `mapstructure:",squash"`
}

func createDefaultConfig() *Config {
	return &Config{
		Interval:             10 * time.Second,
		MetricsBuilderConfig: metadata.DefaultMetricsBuilderConfig(),
		LogsBuilderConfig:    metadata.DefaultLogsBuilderConfig(),
	}
}

// Validate checks the interval.
func (c *Config) Validate() error {
	if c.Interval <= 0 {
		return errors.New("interval: must be above zero")
	}
	return nil
}
