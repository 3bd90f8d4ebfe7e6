package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/profinfer/profinfer/internal/roofline"
)

// roofsCmd measures this machine's roofs now and keeps them in the collector's state file,
// as the collector does at its start: a node set up while idle (before its model server
// takes load, or a test run its builds) has final roofs from the first start on, where a
// collector that first starts beside busy CPUs keeps provisional ones until an idle start.
func roofsCmd(args []string) error {
	fs := flag.NewFlagSet("roofs", flag.ContinueOnError)
	state := fs.String("state", roofline.DefaultStateFile, "the state file, the receiver's roofline.state_file")
	probe := fs.Duration("probe", roofline.DefaultProbe, "the most the measurement takes, the receiver's roofline.probe_duration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("roofs takes no arguments, got %q", fs.Args())
	}
	if *probe <= 0 {
		return errors.New("-probe: must be above zero")
	}
	// Its warnings (a state file it cannot read or write) to standard error, as the CLI's.
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
	r := roofline.Establish(roofline.EstablishConfig{Probe: *probe, StateFile: *state}, log)
	fmt.Println(describeRoofs(r, *state))
	if r.Provisional {
		return errors.New("the CPUs were busy: these roofs are provisional, and the next idle start of the collector (or of this command) replaces them")
	}
	return nil
}

// describeRoofs says what r are, where they came from and where they are kept.
func describeRoofs(r roofline.Roofs, state string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "roofs %s %s (%d trials), kept in %s:\n", r.Source, r.At.UTC().Format(time.RFC3339), r.Trials, state)
	fmt.Fprintf(&b, "  fp32 %.1f GFLOP/s, int8 %.1f Gop/s, bf16 %.1f GFLOP/s\n", r.FLOPS/1e9, r.Int8/1e9, r.BF16/1e9)
	for _, l := range r.Levels {
		fmt.Fprintf(&b, "  %s (%d KiB) %.1f GB/s\n", l.Name, l.Size>>10, l.Bandwidth/1e9)
	}
	fmt.Fprintf(&b, "  DRAM %.1f GB/s", r.Bandwidth/1e9)
	return b.String()
}
