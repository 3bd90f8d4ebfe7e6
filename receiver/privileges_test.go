//go:build e2e

package receiver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Without privileges the collector refuses to start and says what it needs.
func TestE2ENoPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root (to drop privileges from)")
	}
	bin, _ := filepath.Abs("../bin/otelcol-profinfer")
	if _, err := os.Stat(bin); err != nil {
		testbench.Missing(t, "bin/otelcol-profinfer; run `make build`")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testbench.Missing(t, "setpriv (util-linux)")
	}
	// An inline config: the unprivileged user cannot read the test's temporary directory.
	cfg := "yaml:{receivers: {profinfer: {}}, exporters: {debug: {}}, " +
		"service: {telemetry: {metrics: {level: none}}, pipelines: {traces: {receivers: [profinfer], exporters: [debug]}}}}"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", bin, "--config", cfg)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("collector started without privileges:\n%s", out)
	}
	if want := "profinfer needs root, or CAP_BPF and CAP_PERFMON"; !strings.Contains(string(out), want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}
