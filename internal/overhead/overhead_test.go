package overhead

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var nan = math.NaN()

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, nan, 1}, 3}, // unmeasured values do not count
		{[]float64{nan}, nan},
		{nil, nan},
	} {
		if got := Median(c.xs); !same(got, c.want) {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// The ratio of paired rounds is the median of per-round ratios, not a ratio of medians.
func TestPairedRatio(t *testing.T) {
	xs := []float64{45, 90, 30}
	base := []float64{50, 100, 60}
	if got := PairedRatio(xs, base); got != 0.9 {
		t.Errorf("PairedRatio = %v, want 0.9 (ratios 0.9, 0.9, 0.5)", got)
	}
	if got := PairedRatio(xs, nil); !math.IsNaN(got) {
		t.Errorf("PairedRatio without a baseline = %v, want NaN", got)
	}
}

func TestSummarize(t *testing.T) {
	run := func(pp, tg, dropped float64) Run {
		r := NewRun()
		r.PP, r.TG, r.Dropped = pp, tg, dropped
		return r
	}
	base := []Run{run(100, 50, nan), run(200, 40, nan)}
	got := Summarize("default", []Run{run(90, 40, 0), run(150, 36, 7)}, base)
	want := Row{Config: "default", PP: 120, TG: 38, PPRatio: 0.825, TGRatio: 0.85, TGLow: nan, TGHigh: nan,
		CPUPerToken: nan, TracerCPU: nan, TracerPeakRSS: nan, EventsPerSec: nan, Dropped: 7}
	if d := cmp.Diff(want, got, cmpopts.EquateNaNs(), cmpopts.EquateApprox(0, 1e-12)); d != "" {
		t.Errorf("Summarize (-want +got):\n%s", d)
	}
	if got := Summarize("baseline", base, base); got.TGRatio != 1 || !math.IsNaN(got.Dropped) {
		t.Errorf("baseline row: tg ratio %v, dropped %v; want 1 and unmeasured", got.TGRatio, got.Dropped)
	}
}

// The interval is order statistics of the values: the extremes of 8 (99.2% coverage), the
// third from each end of 12 (96.1%), none below 6 values.
func TestMedianInterval(t *testing.T) {
	seq := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(n - i) // descending: the interval must sort them
		}
		return xs
	}
	for _, c := range []struct {
		xs     []float64
		lo, hi float64
	}{
		{seq(5), nan, nan},
		{seq(6), 1, 6},
		{seq(8), 1, 8},
		{seq(12), 3, 10},
		{append(seq(8), nan, nan), 1, 8}, // unmeasured values do not count
	} {
		lo, hi := MedianInterval(c.xs)
		if !same(lo, c.lo) || !same(hi, c.hi) {
			t.Errorf("MedianInterval(%v) = %v, %v; want %v, %v", c.xs, lo, hi, c.lo, c.hi)
		}
	}
}

func TestOverheadRatio(t *testing.T) {
	if got := OverheadRatio(Row{TGRatio: 0.4}, Row{TGRatio: 0.9}); math.Abs(got-6) > 1e-9 {
		t.Errorf("OverheadRatio = %v, want 6 (losses 0.6 and 0.1)", got)
	}
}

func TestOrder(t *testing.T) {
	xs := []string{"a", "b", "c", "d", "e"}
	predecessors := map[string]map[string]bool{}
	for k := range 8 {
		got := Order(xs, k)
		if !cmp.Equal(got, Order(xs, k)) {
			t.Fatalf("round %d's order is not reproducible", k)
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if !cmp.Equal(sorted, xs) {
			t.Fatalf("Order(%v, %d) = %v, not a permutation", xs, k, got)
		}
		for i := 1; i < len(got); i++ {
			if predecessors[got[i]] == nil {
				predecessors[got[i]] = map[string]bool{}
			}
			predecessors[got[i]][got[i-1]] = true
		}
	}
	if !cmp.Equal(xs, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("Order modified its input: %v", xs)
	}
	for x, p := range predecessors {
		if len(p) < 2 {
			t.Errorf("%s always runs after %v over 8 rounds", x, p)
		}
	}
}

func TestTable(t *testing.T) {
	rows := []Row{
		{Config: "baseline", PP: 170.04, TG: 49.96, PPRatio: 1, TGRatio: 1, TGLow: nan, TGHigh: nan, CPUPerToken: 0.04512,
			TracerCPU: nan, TracerPeakRSS: nan, EventsPerSec: nan, Dropped: nan},
		{Config: "node-default", PP: nan, TG: 30, PPRatio: nan, TGRatio: 0.75, TGLow: 0.7, TGHigh: 0.8, CPUPerToken: 0.1,
			TracerCPU: 0.123, TracerPeakRSS: 64 << 20, EventsPerSec: 12345.6, Dropped: 0},
	}
	want := `| config | pp512 t/s | tg128 t/s | pp ratio | tg ratio | tg ratio 95% CI | target CPU ms/token | tracer CPU % of a core | tracer peak RSS MiB | events/s | drops |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| baseline | 170.0 | 50.0 | 1.000 | 1.000 | — | 45.12 | — | — | — | — |
| node-default | — | 30.0 | — | 0.750 | 0.700–0.800 | 100.00 | 12.3 | 64 | 12346 | 0 |
`
	if d := cmp.Diff(want, Table(rows, 512, 128)); d != "" {
		t.Errorf("Table (-want +got):\n%s", d)
	}
}

func TestCPUModel(t *testing.T) {
	info := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\nprocessor\t: 1\nmodel name\t: other\n"
	if got := CPUModel(info); got != "AMD EPYC 9654 96-Core Processor" {
		t.Errorf("CPUModel = %q", got)
	}
	if got := CPUModel("processor\t: 0\n"); got != "unknown" {
		t.Errorf("CPUModel without a model name = %q, want unknown", got)
	}
}

func TestNaiveScript(t *testing.T) {
	s := NaiveScript("/lib/libggml-cpu.so.0")
	for _, want := range []string{
		"uprobe:/lib/libggml-cpu.so.0:ggml_compute_forward_*",
		"uretprobe:/lib/libggml-cpu.so.0:ggml_cpu_extra_compute_forward",
		NaiveReady,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("naive script lacks %q:\n%s", want, s)
		}
	}
}

// same reports whether a and b are equal, NaN being equal to NaN.
func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
