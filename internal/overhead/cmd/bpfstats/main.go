// bpfstats prints every loaded BPF program's name, runs and mean run time (needs
// kernel.bpf_stats_enabled=1).
package main

import (
	"fmt"
	"log"

	"github.com/profinfer/profinfer/internal/overhead"
)

func main() {
	ps, err := overhead.Programs()
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range ps {
		if p.Runs > 0 {
			fmt.Printf("%-24s %8d runs %8.0f ns/run\n", p.Name, p.Runs, float64(p.Runtime.Nanoseconds())/float64(p.Runs))
		}
	}
}
