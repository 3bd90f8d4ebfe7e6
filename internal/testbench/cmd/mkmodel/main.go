// Command mkmodel writes one of the test bench's synthetic models as an F16 GGUF file.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/profinfer/profinfer/internal/testbench"
)

func main() {
	arch := flag.String("arch", "llama-1b", "model shape")
	out := flag.String("o", "", "output file")
	seed := flag.Uint64("seed", 42, "random seed")
	flag.Parse()
	s, ok := testbench.Shapes[*arch]
	if !ok || *out == "" {
		var names []string
		for n := range testbench.Shapes {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: mkmodel -arch {%v} -o FILE\n", names)
		os.Exit(2)
	}
	if err := testbench.WriteModel(*out, s, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}
