package probe

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/bpf"
	"github.com/profinfer/profinfer/internal/perfcount"
)

// CounterMap creates the perf event array the programs read per-thread counters from,
// and makes spec's programs use it. cilium/ebpf sizes every perf event array to the
// number of CPUs, as suits per-CPU events; this one holds perfcount.Slots threads'
// counters, so it is created directly. The caller owns the map.
func CounterMap(spec *ebpf.CollectionSpec) (*ebpf.Map, error) {
	attr := struct {
		mapType, keySize, valueSize, maxEntries uint32
	}{uint32(ebpf.PerfEventArray), 4, 4, perfcount.Slots * perfcount.PerThread}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return nil, fmt.Errorf("creating the perf counter map: %w", errno)
	}
	m, err := ebpf.NewMapFromFD(int(fd))
	if err != nil {
		unix.Close(int(fd))
		return nil, fmt.Errorf("creating the perf counter map: %w", err)
	}
	for _, p := range spec.Programs {
		for i := range p.Instructions {
			ins := &p.Instructions[i]
			if ins.IsLoadFromMap() && ins.Reference() == bpf.ProfinferMapCounters {
				if err := ins.AssociateMap(m); err != nil {
					m.Close()
					return nil, fmt.Errorf("perf counter map in %s: %w", p.Name, err)
				}
			}
		}
	}
	return m, nil
}

// CounterTable publishes perf counters to the programs: their descriptors in events
// (from CounterMap), each thread's slot in the programs' counter_slots map.
func CounterTable(events *ebpf.Map, maps *bpf.ProfinferMaps) perfcount.Table {
	return counterTable{events, maps.CounterSlots}
}

type counterTable struct{ events, slots *ebpf.Map }

func (c counterTable) PutEvent(i uint32, fd int) error { return c.events.Put(i, uint32(fd)) }
func (c counterTable) DeleteEvent(i uint32) error      { return c.events.Delete(i) }
func (c counterTable) PutSlot(tid, slot uint32) error  { return c.slots.Put(tid, slot) }
func (c counterTable) DeleteSlot(tid uint32) error     { return c.slots.Delete(tid) }
