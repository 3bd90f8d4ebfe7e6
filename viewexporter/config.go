package viewexporter // import "github.com/profinfer/profinfer/viewexporter"

import (
	"fmt"
	"net"
	"strconv"
)

// Config is the profinferview exporter's configuration.
type Config struct {
	// Endpoint is the address the page is served on. The default keeps it on this
	// machine: the page shows paths, model names and command-line facts.
	Endpoint string `mapstructure:"endpoint"`
}

func createDefaultConfig() *Config {
	return &Config{Endpoint: "127.0.0.1:9465"}
}

// Validate checks that the endpoint is a host and port.
func (c *Config) Validate() error {
	_, port, err := net.SplitHostPort(c.Endpoint)
	if err != nil {
		return fmt.Errorf("endpoint: %q is not host:port: %w", c.Endpoint, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("endpoint: port %q is not a number from 0 to 65535", port)
	}
	return nil
}
