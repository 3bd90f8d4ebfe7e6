package findingsconnector // import "github.com/profinfer/profinfer/findingsconnector"

import (
	"errors"
	"time"
)

// Config is the profinferfindings connector's configuration.
type Config struct {
	// Interval is how often the findings are judged, at the metrics that come in: the
	// receiver sends each process's metrics every collection interval, and its last at
	// its exit.
	Interval time.Duration `mapstructure:"interval"`
}

func createDefaultConfig() *Config {
	return &Config{Interval: 10 * time.Second}
}

// Validate checks the interval.
func (c *Config) Validate() error {
	if c.Interval <= 0 {
		return errors.New("interval: must be above zero")
	}
	return nil
}
