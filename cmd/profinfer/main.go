// Command profinfer reads what the collector's file exporter wrote (OTLP JSON lines) and
// answers from it:
//
//	profinfer report [-o DIR] FILE...   the op table and findings on the terminal;
//	                                    DIR/report.html and DIR/trace.json (Perfetto)
//	profinfer dot [-graph N] FILE...    traced graphs as Graphviz DOT
//
// Run it with `go run ./cmd/profinfer report profinfer-output.jsonl`.
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  profinfer report [-o DIR] FILE...   op table and findings; DIR/report.html, DIR/trace.json
  profinfer dot [-graph N] FILE...    traced graphs as Graphviz DOT on standard output
FILE is the collector's file exporter output (format: json); - reads standard input.
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
