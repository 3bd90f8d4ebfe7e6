// Command mkmodel writes one of the test bench's synthetic models: an F16 GGUF file for
// the llama shapes, a legacy ggml file for whisper's; or, with -wav, a test recording.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/profinfer/profinfer/internal/testbench"
)

func main() {
	arch := flag.String("arch", "llama-1b", "model shape")
	out := flag.String("o", "", "output file")
	seed := flag.Uint64("seed", 42, "random seed")
	wav := flag.Float64("wav", 0, "write a 16 kHz WAV recording of this many seconds instead of a model")
	flag.Parse()
	s, llama := testbench.Shapes[*arch]
	w, whisper := testbench.WhisperShapes[*arch]
	if *out == "" || !llama && !whisper && *wav <= 0 {
		names := append(slices.Collect(maps.Keys(testbench.Shapes)), slices.Collect(maps.Keys(testbench.WhisperShapes))...)
		slices.Sort(names)
		fmt.Fprintf(os.Stderr, "usage: mkmodel -arch {%v} -o FILE\n       mkmodel -wav SECONDS -o FILE\n", names)
		os.Exit(2)
	}
	var err error
	switch {
	case *wav > 0:
		err = testbench.WriteWAV(*out, *wav, *seed)
	case whisper:
		err = testbench.WriteWhisperModel(*out, w, *seed)
	default:
		err = testbench.WriteModel(*out, s, *seed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}
