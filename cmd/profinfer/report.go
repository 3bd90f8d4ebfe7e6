package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/page"
	"github.com/profinfer/profinfer/internal/perfetto"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/summary"
)

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	dir := fs.String("o", "profinfer-report", "directory for report.html and trace.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("report: name at least one file the file exporter wrote (- for standard input)")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	tracePath := filepath.Join(*dir, "trace.json")
	tf, err := os.Create(tracePath)
	if err != nil {
		return err
	}
	defer tf.Close()
	trace := perfetto.NewWriter(tf)
	agg := summary.New()
	var total report.Stats
	for _, name := range fs.Args() {
		st, err := readFile(name, report.Summary{Aggregator: agg}, trace)
		total.Bytes += st.Bytes
		total.Traces += st.Traces
		total.Metrics += st.Metrics
		if err != nil {
			return err
		}
	}
	if err := trace.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tracePath, err)
	}
	if err := tf.Close(); err != nil {
		return err
	}
	v := agg.Snapshot()
	advise.Annotate(v)
	if err := report.Table(os.Stdout, v); err != nil {
		return err
	}
	htmlPath := filepath.Join(*dir, "report.html")
	if err := page.WriteFile(htmlPath, v); err != nil {
		return err
	}
	fmt.Printf("read %.1f MB: %d span batches, %d metric batches\nwrote %s (open it in a browser) and %s (open it in Perfetto)\n",
		float64(total.Bytes)/1e6, total.Traces, total.Metrics, htmlPath, tracePath)
	return nil
}

// readFile reads one input, - being standard input.
func readFile(name string, sinks ...report.Sink) (report.Stats, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return report.Stats{}, err
		}
		defer f.Close()
		r = f
	}
	return report.Read(r, name, sinks...)
}
