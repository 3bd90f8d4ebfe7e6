package profiler

import (
	"strconv"
	"testing"
)

// The device's op labels are kept once each, up to maxLabels: past it they are forgotten
// and kept anew, and a label read again is the string kept.
func TestLabelsBounded(t *testing.T) {
	in := &ingest{labels: map[string]string{}}
	first := in.label([]byte("MUL_MAT_VEC q4_0"))
	if again := in.label([]byte("MUL_MAT_VEC q4_0")); again != first || len(in.labels) != 1 {
		t.Fatalf("label read again: %q, %d kept", again, len(in.labels))
	}
	for i := range maxLabels + 10 {
		if l := in.label([]byte("op " + strconv.Itoa(i))); l != "op "+strconv.Itoa(i) {
			t.Fatalf("label %d read as %q", i, l)
		}
		if len(in.labels) > maxLabels {
			t.Fatalf("%d labels kept, at most %d", len(in.labels), maxLabels)
		}
	}
}
