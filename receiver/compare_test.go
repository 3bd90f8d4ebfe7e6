//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/compare"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/testbench"
)

// "Why did it get slower?" on real pairs: two llama-bench runs, one after the other,
// under one collector with the default configuration (nodes sampled), compared as a user
// would select them in its recording: FILE@pid=A against FILE@pid=B. Each pair has the
// answer it must give, and llama-bench's own figures hold the comparison's per-token
// change to account.

// bench is one llama-bench run of a pair.
type bench struct {
	exe  string
	args []string
}

// benchPair runs a then b under one collector and compares b against a. It returns the
// comparison and llama-bench's results for each side.
func benchPair(t *testing.T, a, b bench) (*compare.Comparison, [2][]testbench.BenchResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Each model file is read whole first, as a server's is in the page cache: llama-bench
	// leaves its warm-up repetition out of its figures and the comparison does not, and
	// with the file evicted the warm-up pays its reads (a 32-token F16 prefill: 1.2 s for
	// 0.4), which would set the two apart.
	for _, r := range []bench{a, b} {
		if i := slices.Index(r.args, "-m"); i >= 0 && i+1 < len(r.args) {
			cacheFile(t, r.args[i+1])
		}
	}
	c := startCollectorOf(t, ctx, []string{a.exe, b.exe}, "")
	var results [2][]testbench.BenchResult
	var pids [2]int
	for i, r := range []bench{a, b} {
		p, err := testbench.Start(r.exe, r.args...)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if results[i], err = testbench.ParseBench(p.Stdout.Bytes()); err != nil {
			t.Fatal(err)
		}
		pids[i] = p.PID()
	}
	time.Sleep(1500 * time.Millisecond) // a collection interval, for the metrics
	c.stop(t)
	var sides [2]*compare.Side
	for i, name := range []string{"A", "B"} {
		sel, err := compare.Parse(fmt.Sprintf("%s@pid=%d", c.out, pids[i]))
		if err != nil {
			t.Fatal(err)
		}
		sides[i] = compare.NewSide(name, sel)
		f, err := os.Open(c.out)
		if err != nil {
			t.Fatal(err)
		}
		_, err = report.Read(f, c.out, sides[i])
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	cmp, err := compare.Diff(sides[0], sides[1], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := report.Compare(&text, cmp); err != nil {
		t.Fatal(err)
	}
	t.Logf("llama-bench A %+v, B %+v; the comparison:\n%s", results[0], results[1], text.String())
	return cmp, results
}

// cacheFile reads the file at path whole, bringing it into the page cache.
func cacheFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(io.Discard, f); err != nil {
		t.Fatal(err)
	}
}

// phaseOf returns the comparison's phase of that name.
func phaseOf(t *testing.T, c *compare.Comparison, name string) compare.PhaseDiff {
	t.Helper()
	for _, ph := range c.Phases {
		if ph.Phase == name {
			return ph
		}
	}
	t.Fatalf("no %s phase in the comparison", name)
	return compare.PhaseDiff{}
}

// checkAgainstBench holds each phase's relative change per token to llama-bench's for
// the same runs (pp: prefill, tg: decode): the same processes timed by two means.
// llama-bench averages its repetitions' rates and leaves its warm-up out, where the
// comparison divides every token by every second: they agree within 10%, and within
// twice llama-bench's own spread where one slow repetition widens it.
func checkAgainstBench(t *testing.T, c *compare.Comparison, results [2][]testbench.BenchResult) {
	t.Helper()
	for _, ph := range []string{"prefill", "decode"} {
		var ts, sd [2]float64
		for i, rs := range results {
			for _, r := range rs {
				if (ph == "prefill") == (r.NPrompt > 0) {
					ts[i], sd[i] = r.AvgTS, r.StddevTS/r.AvgTS
				}
			}
		}
		bench := ts[0]/ts[1] - 1 // B's time per token against A's
		spread := (1 + bench) * math.Hypot(sd[0], sd[1])
		got := phaseOf(t, c, ph).Relative.Value
		if math.Abs(got-bench) > 0.1*(1+math.Abs(bench))+2*spread {
			t.Errorf("%s: the comparison's change per token %+.1f%%, llama-bench's %+.1f%% ± %.1f%% (%.1f against %.1f t/s)",
				ph, 100*got, 100*bench, 100*spread, ts[0], ts[1])
		}
	}
}

// setupDiffers says whether the comparison lists the setup item key as differing.
func setupDiffers(c *compare.Comparison, key string) bool { return setupItem(c, key).Differs }

// setupItem is the comparison's setup item key; the zero item where it has none.
func setupItem(c *compare.Comparison, key string) compare.SetupItem {
	for _, s := range c.Setup {
		if s.Key == key {
			return s
		}
	}
	return compare.SetupItem{}
}

// largest is the phase's row that changed most, the unexplained remainder aside.
func largest(ph compare.PhaseDiff) *compare.Row {
	for i := range ph.Rows {
		if ph.Rows[i].Kind != "outside" {
			return &ph.Rows[i]
		}
	}
	return nil
}

// The same run twice: no change beyond noise, in either phase.
func TestE2ECompareSame(t *testing.T) {
	e := testbench.Require(t)
	run := bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 32, 32, 2, 5)}
	c, results := benchPair(t, run, run)
	for _, ph := range c.Phases {
		if ph.Beyond || ph.Verdict != "no change beyond noise" {
			t.Errorf("%s: %s (%+.1f%%, interval %+.1f%% to %+.1f%%), want no change beyond noise", ph.Phase, ph.Verdict,
				100*ph.Relative.Value, 100*ph.Relative.Low, 100*ph.Relative.High)
		}
	}
	for _, s := range c.Setup {
		if s.Differs {
			t.Errorf("the same run's setup differs in %s: %s against %s", s.Label, s.A, s.B)
		}
	}
	checkAgainstBench(t, c, results)
}

// contextKeys are the settings each llama_decode span carries of its llama_context.
var contextKeys = []string{"llama.context.size", "llama.context.batch_size", "llama.context.ubatch_size"}

// llama-bench makes a context per test, each sized for it (pp16's n_ctx and n_batch 16,
// tg48's 48): the same run twice differs in no context setting, whichever context was
// live when profinfer attached, and each side names what each phase used.
func TestE2ECompareContextPerTest(t *testing.T) {
	e := testbench.Require(t)
	run := bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 16, 48, 2, 1)}
	c, _ := benchPair(t, run, run)
	for _, k := range contextKeys {
		if it := setupItem(c, k); it.Differs || it.A != it.B || it.A == "unknown" || it.A == "" {
			t.Errorf("the same run twice: %s %q against %q, differs %v; want the same, known", k, it.A, it.B, it.Differs)
		}
	}
	// llama.cpp caps a context's n_batch at the n_ctx it was asked for, which llama-bench
	// sizes for each test (n_prompt + n_gen): each phase's is its test's. Decode reading
	// 16 would be the prefill test's context, not read again when the decode test's took
	// its address.
	if it := setupItem(c, "llama.context.batch_size"); it.A != "prefill 16, decode 48" {
		t.Errorf("batch size %q, want prefill 16, decode 48: each test's context", it.A)
	}
}

// -ub 8 against the default on the same tests: the ubatch differs, the batch does not.
func TestE2ECompareUbatch(t *testing.T) {
	e := testbench.Require(t)
	c, _ := benchPair(t, bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 16, 48, 2, 1)},
		bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 16, 48, 2, 1, "-ub", "8")})
	if it := setupItem(c, "llama.context.ubatch_size"); !it.Differs || it.A != "prefill 16, decode 48" || it.B != "8" {
		t.Errorf("ubatch %q against %q, differs %v; want prefill 16, decode 48 against 8, differing", it.A, it.B, it.Differs)
	}
	if it := setupItem(c, "llama.context.batch_size"); it.Differs {
		t.Errorf("batch %q against %q differs: -ub leaves it", it.A, it.B)
	}
}

// -t 1 against -t 2: decode faster with two threads, most of it in the matmuls, and the
// threads first among the setup's differences.
func TestE2ECompareThreads(t *testing.T) {
	e := testbench.Require(t)
	c, results := benchPair(t, bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 32, 32, 1, 3)},
		bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 32, 32, 2, 3)})
	dec := phaseOf(t, c, "decode")
	if dec.Verdict != "faster" || !dec.Beyond {
		t.Errorf("decode: %s, beyond noise %v (%+.1f%%), want faster", dec.Verdict, dec.Beyond, 100*dec.Relative.Value)
	}
	if r := largest(dec); r == nil || r.Op != "MUL_MAT" || !r.Beyond || r.Share < 0.4 {
		t.Errorf("decode's largest change %+v, want MUL_MAT's, beyond noise, the most of it", r)
	}
	if !setupDiffers(c, "ggml.threads") {
		t.Errorf("the setup does not say the threads differ: %+v", c.Setup)
	}
	checkAgainstBench(t, c, results)
}

// Q4_0 against F16 of the same model: the matmuls' weights change type, in one row each,
// and decode is slower, by the weights it reads.
func TestE2ECompareQuantisation(t *testing.T) {
	e := testbench.Require(t)
	c, results := benchPair(t, bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 32, 32, 2, 5)},
		bench{e.Bin("llama-bench"), e.BenchArgs("llama-1b-f16", 32, 32, 2, 5)})
	dec := phaseOf(t, c, "decode")
	if dec.Verdict != "slower" || !dec.Beyond {
		t.Errorf("decode: %s, beyond noise %v (%+.1f%%), want slower", dec.Verdict, dec.Beyond, 100*dec.Relative.Value)
	}
	r := largest(dec)
	if r == nil || r.Op != "MUL_MAT" || r.WeightA != "q4_0" || r.WeightB != "f16" || r.Presence != "both" || !r.Beyond {
		t.Errorf("decode's largest change %+v, want MUL_MAT q4_0 → f16, aligned, beyond noise", r)
	}
	if !setupDiffers(c, "llama.model.file_type") {
		t.Errorf("the setup does not say the model's type differs: %+v", c.Setup)
	}
	checkAgainstBench(t, c, results)
}

// A release from the matrix (b4234, December 2024) against the newest build, both static,
// on the same model: the builds differ first, and whatever the change, it is llama-bench's.
func TestE2ECompareRelease(t *testing.T) {
	e := testbench.Require(t)
	args := e.BenchArgs("llama-1b-q4_0", 32, 32, 2, 3)
	old := e.OldStatic("b4234")
	c, results := benchPair(t, bench{old, args}, bench{e.Portable("llama-bench"), args})
	if !setupDiffers(c, "llama.build.commit") {
		t.Errorf("the setup does not say the builds differ: %+v", c.Setup)
	}
	checkAgainstBench(t, c, results)
}
