package profiler

import (
	"testing"

	"github.com/profinfer/profinfer/internal/window"
)

// A phase's untraced graphs tell the controller a few times a window: past untracedTold
// no more, until a window ends, which lets a phase that window did not trace tell again;
// a traced phase is told of once.
func TestNotePhaseTellsAgainAfterWindow(t *testing.T) {
	in := &ingest{}
	p := &inProc{}
	decode, prefill := window.Phase{Name: "decode"}, window.Phase{Name: "prefill"}
	told := func() (untraced, traced int) {
		for _, e := range in.effects {
			switch e.kind {
			case phaseUntraced:
				untraced++
			case phaseTraced:
				traced++
			}
		}
		in.effects = nil
		return
	}
	in.notePhase(p, prefill, true)
	for range 3 * untracedTold {
		in.notePhase(p, decode, false)
	}
	if u, tr := told(); u != untracedTold || tr != 1 {
		t.Fatalf("told %d untraced, %d traced; want %d and 1", u, tr, untracedTold)
	}
	p.windowEnded()
	in.notePhase(p, decode, false)
	in.notePhase(p, prefill, true)
	if u, tr := told(); u != 1 || tr != 0 {
		t.Errorf("after a window: told %d untraced, %d traced; want 1 and 0", u, tr)
	}
}
