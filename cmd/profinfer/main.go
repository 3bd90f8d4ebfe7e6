// Command profinfer reads what the collector's file exporter wrote (OTLP JSON lines) and
// answers from it:
//
//	profinfer report [-o DIR] FILE...   the op table and findings on the terminal;
//	                                    DIR/report.html and DIR/trace.json (Perfetto)
//	profinfer dot [-graph N] FILE...    traced graphs as Graphviz DOT
//	profinfer compare [-o DIR] [-phase P] A B
//	                                    what changed from recording A to B, per token,
//	                                    split over the ops (docs/compare.md)
//	profinfer roofs [-state FILE]       this machine's roofs, measured now while its CPUs
//	                                    are idle and kept for the collector
//
// Run it with `go run ./cmd/profinfer report profinfer-output.pb`.
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  profinfer report [-o DIR] FILE...   op table and findings; DIR/report.html, DIR/trace.json
  profinfer dot [-graph N] FILE...    traced graphs as Graphviz DOT on standard output
  profinfer compare [-o DIR] [-phase decode|prefill] [-floor F] A B
                                      B against A: what differs in the setup, the time
                                      per token, its change split over the ops with an
                                      interval and a verdict; DIR/compare.json
  profinfer roofs [-state FILE] [-probe D]
                                      this machine's roofs, measured now as the
                                      collector measures them at its start, and kept in
                                      its state file (default /var/lib/profinfer/
                                      roofline.json): run it while the CPUs are idle
FILE is the collector's file exporter output (format: proto or json); - reads standard
input.
A and B are each FILE[,FILE...][@pid=N|exe=NAME][,from=T][,to=T]: files of one
recording, and optionally a process and a time range of them; T is an RFC 3339 time
or an offset from the side's first span (30s, 2m). Both may name the same files:
  profinfer compare out.jsonl@pid=101 out.jsonl@pid=202
  profinfer compare run.jsonl@to=1m run.jsonl@from=1m
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "report":
		err = reportCmd(os.Args[2:])
	case "dot":
		err = dotCmd(os.Args[2:])
	case "compare":
		err = compareCmd(os.Args[2:])
	case "roofs":
		err = roofsCmd(os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "profinfer: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profinfer:", err)
		os.Exit(1)
	}
}
