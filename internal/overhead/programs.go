package overhead

import (
	"errors"
	"os"
	"time"

	"github.com/cilium/ebpf"
)

// Program is what the kernel's statistics say of one loaded BPF program. They count only
// while kernel.bpf_stats_enabled is 1.
type Program struct {
	Name    string
	Type    ebpf.ProgramType
	Runs    uint64
	Runtime time.Duration
}

// Programs returns the statistics of every BPF program loaded on the machine, skipping
// those that went away while it looked.
func Programs() ([]Program, error) {
	var ps []Program
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ps, nil
		}
		if err != nil {
			return ps, err
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		info, ierr := p.Info()
		st, serr := p.Stats()
		p.Close()
		if ierr != nil || serr != nil {
			continue
		}
		ps = append(ps, Program{Name: info.Name, Type: info.Type, Runs: st.RunCount, Runtime: st.Runtime})
	}
}
