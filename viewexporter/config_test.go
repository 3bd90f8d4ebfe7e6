package viewexporter

import (
	"context"
	"net"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/profinfer/profinfer/viewexporter/internal/metadata"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct{ endpoint, want string }{
		{"127.0.0.1:9465", ""},
		{"[::1]:0", ""},
		{"localhost", `endpoint: "localhost" is not host:port: address localhost: missing port in address`},
		{"127.0.0.1:http", `endpoint: port "http" is not a number from 0 to 65535`},
		{"127.0.0.1:70000", `endpoint: port "70000" is not a number from 0 to 65535`},
	} {
		err := (&Config{Endpoint: tc.endpoint}).Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.endpoint, got, tc.want)
		}
	}
	if createDefaultConfig().Endpoint != "127.0.0.1:9465" {
		t.Error("the default endpoint is not on loopback at 9465")
	}
}

// A port already taken stops the collector with an error that names the endpoint.
func TestStartOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := &Config{Endpoint: ln.Addr().String()}
	v := getView(exportertest.NewNopSettings(metadata.Type), cfg)
	err = v.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !strings.HasPrefix(err.Error(), "profinferview: serving the page on "+cfg.Endpoint+": ") {
		t.Errorf("err = %v", err)
	}
	if err := v.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
