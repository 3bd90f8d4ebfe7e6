package page

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/compare"
)

// hostileComparison has every string hostile, a row on one side only, one moved to a
// device and a move: what a GGUF file, a process and a file name can put in one.
func hostileComparison() *compare.Comparison {
	side := func(name string) compare.SideInfo {
		return compare.SideInfo{Name: name, Selection: compare.Selection{Spec: hostile, Files: []string{hostile}}, Processes: []string{hostile + " (pid 1)"},
			First: time.Unix(1_800_000_000, 0).UTC(), Last: time.Unix(1_800_000_060, 0).UTC()}
	}
	est := func(v, lo, hi float64) compare.Estimate { return compare.Estimate{Value: v, Low: lo, High: hi} }
	ps := func(ms float64) compare.PhaseSide {
		return compare.PhaseSide{Steps: 40, Tokens: 40, Seconds: ms * 40 / 1e3, PerUnitMS: ms, PerSecond: 1e3 / ms, TracedSteps: 40, Blocks: 40, GraphBlocks: 40}
	}
	return &compare.Comparison{A: side("A"), B: side("B"), Warnings: []string{hostile},
		Setup: []compare.SetupItem{{Key: "llama.model.name", Label: hostile, A: hostile, B: "other", Differs: true}, {Key: "host.name", Label: "host", A: hostile, B: hostile}},
		Phases: []compare.PhaseDiff{{Phase: "decode", Unit: "token", A: ps(20), B: ps(10), Change: est(-10, -11, -9), Relative: est(-0.5, -0.55, -0.45),
			Floor: 0.15, Noise: 3, Beyond: true, Verdict: "faster",
			Rows: []compare.Row{
				{Kind: "op", Op: hostile, BackendA: "CPU", BackendB: "VK", WeightA: "q4_0", WeightB: "q4_0", Presence: "moved", Nodes: 48, Tensors: []string{hostile},
					Layers: []int{0, 1}, A: 9, B: 0, Change: est(-9, -9.5, -8.5), Share: 0.9, Noise: 1.55, Beyond: true},
				{Kind: "device", BackendB: "VK", Presence: "b", B: 2, Change: est(2, 1.5, 2.5), Share: -0.2, Noise: 0.5, Beyond: true},
				{Kind: "op", Op: "RMS_NORM", BackendA: hostile, WeightA: hostile, Presence: "a", A: 0.1, Change: est(-0.1, -0.12, -0.08), Share: 0.01, Noise: 0.215},
				{Kind: "outside", Presence: "both", A: 1, B: 0.5, Change: est(-0.5, -3, 2), Share: 0.05, Noise: 0.35}},
			Moves: []compare.Move{{From: "CPU", To: "VK", Layers: []int{0, 1}, Nodes: 48}},
			Notes: []string{hostile}}},
		Method: compare.Method{MinShare: 0.01, FewGraphsShare: 0.05, Confidence: 0.95, Resamples: 2000}}
}

func TestCompareEscapesData(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCompare(&b, hostileComparison()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// The data script holds the payload only as escaped JSON: no tag can close it.
	if strings.Count(page, "</script>") != 4 || strings.Contains(page, "<img src=x") {
		t.Errorf("hostile text reached compare.html as markup")
	}
}
