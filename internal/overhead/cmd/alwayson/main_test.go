//go:build e2e

package main

import (
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// The benchmark runs end to end on a real llama-server and collector, and its account
// sees the collector's probes run in the model, by their statistics and by sampling the
// model: one short round on the tiny model. Its
// figures are not checked; the benchmark is for measuring, not a timed test.
func TestE2EAlwaysOn(t *testing.T) {
	testbench.Require(t)
	collector, _ := filepath.Abs("../../../../bin/otelcol-profinfer")
	config, _ := filepath.Abs("receiver-only.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report, err := run(ctx, options{target: "server", model: "tiny-dense", collector: collector, config: config,
		rounds: 1, arm: 3 * time.Second, tokens: 16, bound: 0.005, sample: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(report)
	m := regexp.MustCompile(`([0-9.]+) probe hits \(([0-9.]+) return probes\), ([0-9.]+) µs of program`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("no probe account in the report:\n%s", report)
	}
	hits, _ := strconv.ParseFloat(m[1], 64)
	rets, _ := strconv.ParseFloat(m[2], 64)
	// Every token is a decode and a graph: two return probes (llama_decode's, the CPU
	// graph's) and more entries. The split probes are off: the CPU computes alone.
	if rets < 2 || rets >= 3 || hits <= rets {
		t.Errorf("%v probe hits a token, %v of them return probes: want 2 return probes and more entries", hits, rets)
	}
	// The target sampled: the probes show in its threads with the collector, and never
	// without it.
	sm := regexp.MustCompile(`: ([0-9]+) of ([0-9]+) samples with the collector in the uprobe path \(([0-9]+) without it\)`).FindStringSubmatch(report)
	if sm == nil || sm[1] == "0" || sm[3] != "0" {
		t.Errorf("the target's samples in the uprobe path, with the collector and without: %v", sm)
	}
	for _, row := range []string{"| accounted cost, share of decode |", "| accounted cost, share of the target's CPU |"} {
		if !strings.Contains(report, row) {
			t.Errorf("no %q row in the report:\n%s", row, report)
		}
	}
}
