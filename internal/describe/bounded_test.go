package describe

import (
	"runtime"
	"testing"

	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/ggml"
)

// A process whose nodes' details keep changing (views whose shapes grow with the
// context, buffers placed anew) fills the caches to their bounds and no further, and
// an entry costs what describes a node, not the detail bytes it was sent as.
func TestCachesBounded(t *testing.T) {
	l := ggml.Layouts[0]
	d := New(target(l))
	weights := tensor{typ: 2, ne: [4]int64{2048, 8192, 1, 1}}
	details := make([][]byte, 2*maxInfos)
	for i := range details {
		x := tensor{typ: 0, ne: [4]int64{2048, int64(1 + i), 1, 1}} // a KV view one longer each time
		mm := tensor{typ: 0, ne: [4]int64{8192, int64(1 + i), 1, 1}, op: 3, name: "kq-0", src: []uint64{0xa0, 0xb0}}
		details[i] = record(events.NodeDetail, 0, 0x1000+uint64(i%512)*0x200, l, mm, []tensor{weights, x}, nil)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, b := range details[:maxInfos-1] { // a full cache
		d.Node(decode(t, b))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / (maxInfos - 1)
	t.Logf("%d bytes a description cached", per)
	if per > 700 {
		t.Errorf("%d bytes a description cached, want at most 700", per)
	}
	for _, b := range details[maxInfos-1:] {
		d.Node(decode(t, b))
		if n := len(d.infos[0]); n > maxInfos {
			t.Fatalf("%d descriptions cached, want at most %d", n, maxInfos)
		}
	}
	if n := len(d.known); n > 512 {
		t.Errorf("%d tensors known, want the 512 addresses sent", n)
	}
	runtime.KeepAlive(d)
	runtime.KeepAlive(details)
}
