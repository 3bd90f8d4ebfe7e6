package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/dag"
)

// traces keeps every span batch: dot draws small inputs, a graph or a few.
type traces []ptrace.Traces

func (t *traces) Traces(td ptrace.Traces) error { *t = append(*t, td); return nil }
func (t *traces) Metrics(pmetric.Metrics) error { return nil }

func dotCmd(args []string) error {
	fs := flag.NewFlagSet("dot", flag.ContinueOnError)
	which := fs.Int("graph", -1, "which traced graph to draw, counting from 0 in file order; -1: all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("dot: name at least one file the file exporter wrote (- for standard input)")
	}
	var all traces
	for _, name := range fs.Args() {
		if _, err := readFile(name, &all); err != nil {
			return err
		}
	}
	n, err := dag.DOT(os.Stdout, all, *which)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no traced graph (ggml.graph.traced) in the input, or none numbered %d", *which)
	}
	return nil
}
