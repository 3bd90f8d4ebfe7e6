// Command profinfer-dot draws the graphs that profinfer traced node by node as Graphviz
// DOT, from the OTLP JSON lines the collector's file exporter writes:
//
//	go run ./internal/dag/cmd/profinfer-dot -graph 3 < traces.jsonl | dot -Tsvg > graph.svg
//
// Each node is a box with its op, tensor and duration; edges run from producer to
// consumer; the critical path is red.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/dag"
)

func main() {
	which := flag.Int("graph", -1, "which traced graph to draw, counting from 0 in file order; -1: all")
	flag.Parse()
	var traces []ptrace.Traces
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line[:min(len(line), 32)], []byte("resourceSpans")) {
			continue // metrics or logs
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			fail(fmt.Errorf("reading OTLP JSON: %w", err))
		}
		traces = append(traces, td)
	}
	if err := sc.Err(); err != nil {
		fail(err)
	}
	n, err := dag.DOT(os.Stdout, traces, *which)
	if err != nil {
		fail(err)
	}
	if n == 0 {
		fail(fmt.Errorf("no traced graph (ggml.graph.traced) in the input, or none numbered %d", *which))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "profinfer-dot:", err)
	os.Exit(1)
}
