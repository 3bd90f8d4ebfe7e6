// bpfstats prints every loaded BPF program's name, runs and mean run time (needs
// kernel.bpf_stats_enabled=1).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

func main() {
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			panic(err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		info, err := p.Info()
		st, serr := p.Stats()
		p.Close()
		if err != nil || serr != nil {
			continue
		}
		if st.RunCount > 0 {
			fmt.Printf("%-24s %8d runs %8.0f ns/run\n", info.Name, st.RunCount, float64(st.Runtime.Nanoseconds())/float64(st.RunCount))
		}
	}
}
