package assemble

import (
	"reflect"
	"testing"

	"github.com/profinfer/profinfer/internal/events"
)

// Splits and copies belong to the decode they ran in; outside one they are not kept.
func TestSplitsAndCopies(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.SplitEnter(1, 1, 5, "CPU", 0xc0, 3, false) // a graph computed outside llama_decode (an RPC server)
	a.SplitExit(1, 1, 6)
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.SplitEnter(1, 1, 12, "CPU", 0xc0, 4, false)
	a.SplitExit(1, 1, 20)
	a.CopyEnter(1, 21, Copy{TID: 1, Src: "CPU", Dst: "RPC", Tensor: "l_out-7", Bytes: 8192})
	a.CopyExit(1, 2, 22, true) // another thread's return: not this copy's
	a.CopyExit(1, 1, 23, true)
	a.SplitEnter(1, 1, 24, "RPC", 0xd0, 5, false)
	a.SplitExit(1, 1, 30)
	a.DecodeExit(1, 1, 32, 0, 0)
	if len(s.decodes) != 1 {
		t.Fatalf("%d decodes", len(s.decodes))
	}
	d := s.decodes[0]
	wantSplits := []Split{{TID: 1, Backend: "CPU", BackendAddr: 0xc0, NNodes: 4, Start: 12, End: 20},
		{TID: 1, Backend: "RPC", BackendAddr: 0xd0, NNodes: 5, Start: 24, End: 30}}
	wantCopies := []Copy{{TID: 1, Src: "CPU", Dst: "RPC", Tensor: "l_out-7", Bytes: 8192, Start: 21, End: 23}}
	if !reflect.DeepEqual(d.Splits, wantSplits) || !reflect.DeepEqual(d.Copies, wantCopies) {
		t.Errorf("decode splits %+v, copies %+v", d.Splits, d.Copies)
	}
}

// Where no split probe saw it (they are off where the scheduler has the CPU alone), each
// CPU graph of a decode is its split, with the graph's extent; a graph outside a decode
// stays loose, and a graph a probed split holds has that split alone.
func TestCPUSplitsFromGraphs(t *testing.T) {
	s := &sink{}
	a := New(s)
	a.GraphEnter(1, 1, 5, 0xa, 7, 2, events.ThreadsCPU{}) // a loose graph
	a.GraphExit(1, 1, 6, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.GraphEnter(1, 1, 12, 0xa, 9, 2, events.ThreadsCPU{})
	a.GraphExit(1, 1, 20, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.DecodeExit(1, 1, 21, 0, 0)
	a.DecodeEnter(1, 1, 30, 1, 0, nil)
	a.SplitEnter(1, 1, 31, "CPU", 0xc0, 9, false)
	a.GraphEnter(1, 1, 32, 0xa, 9, 2, events.ThreadsCPU{})
	a.GraphExit(1, 1, 40, events.CPUSched{}, 0, events.ThreadsCPU{})
	a.SplitExit(1, 1, 41)
	a.DecodeExit(1, 1, 42, 0, 0)
	if len(s.decodes) != 2 || len(s.graphs) != 1 {
		t.Fatalf("%d decodes and %d loose graphs, want 2 and 1", len(s.decodes), len(s.graphs))
	}
	if want := []Split{{TID: 1, Backend: "CPU", NNodes: 9, Start: 12, End: 20}}; !reflect.DeepEqual(s.decodes[0].Splits, want) {
		t.Errorf("the graph's split %+v, want %+v", s.decodes[0].Splits, want)
	}
	if want := []Split{{TID: 1, Backend: "CPU", BackendAddr: 0xc0, NNodes: 9, Start: 31, End: 41}}; !reflect.DeepEqual(s.decodes[1].Splits, want) {
		t.Errorf("with the split probes on, splits %+v, want the probed one %+v", s.decodes[1].Splits, want)
	}
}

// A device's splits end when the CPU's wait for their backend ends, which may be after
// their decode returned: the decode is held until then. Of two splits one wait ends, the
// first's end is a bound; a wait that hardly blocked makes the end a bound too.
func TestDeviceSplits(t *testing.T) {
	s := &sink{}
	a := New(s)
	mm := &NodeInfo{Op: "MUL_MAT", Name: "ffn_up-0"}
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.SplitEnter(1, 1, 11, "VK", 0xa0, 2, true)
	a.SplitNode(1, 1, 0, mm)
	a.SplitNode(1, 1, 2, mm) // the second was lost: not numbered as the second
	a.SplitExit(1, 1, 12)
	a.SplitEnter(1, 1, 13, "CPU", 0xc0, 1, false)
	a.SplitExit(1, 1, 20)
	a.SplitEnter(1, 1, 21, "VK", 0xa0, 3, true)
	a.SplitExit(1, 1, 22)
	a.DecodeExit(1, 1, 23, 0, 0)
	if len(s.decodes) != 0 {
		t.Fatal("a decode whose device splits run was sent")
	}
	a.SyncEnter(1, 1, 30, 0xc0) // the CPU backend's: ends nothing
	a.SyncExit(1, 1, 31)
	a.SyncEnter(1, 1, 40, 0xa0)
	a.SyncExit(1, 1, 90_040)
	if len(s.decodes) != 1 {
		t.Fatalf("%d decodes after the wait", len(s.decodes))
	}
	sp := s.decodes[0].Splits
	if sp[0].Done != 90_040 || !sp[0].Bound || sp[0].Wait != 0 || len(sp[0].Nodes) != 1 {
		t.Errorf("first device split %+v", sp[0])
	}
	if sp[1].Done != 0 || sp[1].Device {
		t.Errorf("CPU split %+v", sp[1])
	}
	if sp[2].Done != 90_040 || sp[2].Bound || sp[2].Wait != 90_000 {
		t.Errorf("last device split %+v", sp[2])
	}

	// Without a wait, the next decode sends the held one as it is.
	a.DecodeEnter(1, 1, 100, 1, 0, nil)
	a.SplitEnter(1, 1, 101, "VK", 0xa0, 3, true)
	a.SplitExit(1, 1, 102)
	a.DecodeExit(1, 1, 103, 0, 0)
	a.DecodeEnter(1, 1, 200, 1, 0, nil)
	if len(s.decodes) != 2 || s.decodes[1].Splits[0].Done != 0 {
		t.Errorf("%d decodes, the held one's split %+v", len(s.decodes), s.decodes[len(s.decodes)-1].Splits)
	}
	a.SyncEnter(1, 1, 201, 0xa0)
	a.SyncExit(1, 1, 205)
	a.DecodeExit(1, 1, 206, 0, 0)
	if len(s.decodes) != 3 {
		t.Errorf("%d decodes: a decode without device splits is sent at its exit", len(s.decodes))
	}
}

// The device's own times, by label: the k-th node of a label gets the label's k-th time
// of this split, counted from the end where the logger holds earlier graphs' too, and a
// node whose time was lost keeps none.
func TestDeviceTimes(t *testing.T) {
	s := &sink{}
	a := New(s)
	mm := &NodeInfo{Op: "MUL_MAT"}
	add := &NodeInfo{Op: "ADD"}
	a.DecodeEnter(1, 1, 10, 1, 0, nil)
	a.SplitEnter(1, 1, 11, "VK", 0xa0, 5, true)
	for _, n := range []struct {
		label string
		info  *NodeInfo
	}{{"mm", mm}, {"add a", add}, {"mm", mm}, {"add b", add}, {"mm", mm}} {
		a.TimedNode(1, 1, n.label, n.info)
	}
	a.TimedNode(1, 2, "mm", mm) // another thread's: not this split's
	// "mm" holds 5 times, 2 of an earlier graph; sent in two records.
	a.DeviceTimes(1, 1, []byte("mm"), 5, 0, []uint64{1, 2, 100})
	a.DeviceTimes(1, 1, []byte("mm"), 5, 3, []uint64{200, 300})
	a.DeviceTimes(1, 1, []byte("add a"), 1, 0, []uint64{50})
	// The record of "add b" was lost.
	a.SplitExit(1, 1, 12)
	a.SyncEnter(1, 1, 13, 0xa0)
	a.SyncExit(1, 1, 14)
	a.DecodeExit(1, 1, 15, 0, 0)
	if len(s.decodes) != 1 {
		t.Fatalf("%d decodes", len(s.decodes))
	}
	got := s.decodes[0].Splits[0].Timed
	want := []struct {
		ns    uint64
		known bool
	}{{100, true}, {50, true}, {200, true}, {0, false}, {300, true}}
	if len(got) != len(want) {
		t.Fatalf("%d timed nodes, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].NS != w.ns || got[i].Known != w.known {
			t.Errorf("node %d: %+v, want %d ns (known %v)", i, got[i], w.ns, w.known)
		}
	}
}
