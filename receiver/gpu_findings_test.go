//go:build e2e

package receiver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/summary"
)

// checkDeviceFindings checks the findings of a real run on lavapipe. Partly offloaded
// (offloaded "partial": the output layer on the GPU, and the layers after the CPU's),
// cpu-fallback names every layer the CPU computes as left there by the GPU layers
// setting, and no op as one the device did not run, and the starved finding, where it
// fires, names lavapipe, whose threads took the CPUs. Every layer offloaded ("full"), the
// CPU computes the embedding rows alone and cpu-fallback is silent.
func checkDeviceFindings(t *testing.T, p *summary.Process, offloaded string) {
	t.Helper()
	found := map[string]summary.Finding{}
	for _, f := range p.Findings {
		found[f.ID] = f
	}
	for _, b := range p.Backends {
		if b.DeviceSplits > 0 {
			t.Logf("%s: the device computed layers %v", b.Backend, b.Layers)
		}
	}
	fallback, fell := found["cpu-fallback"]
	switch offloaded {
	case "partial":
		last := -1
		for _, ph := range p.Phases {
			if ph.Name != "decode" {
				continue
			}
			for _, l := range ph.Layers {
				last = max(last, l.Layer)
			}
		}
		if !fell || last < 0 {
			t.Fatalf("cpu-fallback %v, the CPU's last decode layer %d: %v", fell, last, findingIDs(p))
		}
		left := fmt.Sprintf("layers 0–%d left on the CPU", last)
		if last == 0 {
			left = "layer 0 left on the CPU"
		}
		if !strings.Contains(fallback.Title, left) || strings.Contains(fallback.Title, "did not run") ||
			!strings.Contains(strings.Join(fallback.Evidence, "\n"), "left on the CPU by the GPU layers setting") {
			t.Errorf("cpu-fallback %q (%q), want %q and no op the device did not run", fallback.Title, fallback.Evidence, left)
		}
		if f, ok := found["threads-contended"]; ok && !strings.Contains(f.Title, "lavapipe") {
			t.Errorf("the starved finding names no lavapipe: %q (device software %q)", f.Title, p.Software)
		}
	case "full":
		if fell {
			t.Errorf("every layer offloaded, and cpu-fallback: %q (%q)", fallback.Title, fallback.Evidence)
		}
	default:
		t.Fatalf("offloaded %q: partial or full", offloaded)
	}
}
