// Package overhead is the shared logic of the overhead benchmarks (cmd/peer,
// cmd/alwayson): statistics over paired rounds, the receiver's counters in the
// collector's metrics, the report table, and the kernel's statistics of BPF programs.
package overhead

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Run is what one configuration measured in one round. NaN marks a figure the configuration
// does not have: no prefill for the node-llama-cpp driver, no tracer for a baseline, no
// event counters for bpftrace.
type Run struct {
	PP, TG        float64 // prefill and decode throughput, tokens/s
	CPUPerToken   float64 // target process CPU seconds per generated token
	TracerCPU     float64 // the tracer's CPU over the workload's wall time, in cores
	TracerPeakRSS float64 // bytes
	EventsPerSec  float64 // events the receiver received per second of workload
	Dropped       float64 // events the receiver dropped
}

// NewRun returns a Run with no figure measured yet.
func NewRun() Run {
	n := math.NaN()
	return Run{n, n, n, n, n, n, n}
}

func (r Run) String() string {
	return fmt.Sprintf("pp %s t/s, tg %s t/s, target %s ms/token, tracer %s%% of a core, %s MiB, %s events/s, %s dropped",
		num(r.PP, 1), num(r.TG, 1), num(1e3*r.CPUPerToken, 2), num(100*r.TracerCPU, 1),
		num(r.TracerPeakRSS/(1<<20), 0), num(r.EventsPerSec, 0), num(r.Dropped, 0))
}

// Row is a configuration's line of the report: medians over its rounds.
type Row struct {
	Config           string
	PP, TG           float64
	PPRatio, TGRatio float64 // medians of the per-round ratios to the baseline
	// TGLow and TGHigh bound TGRatio's population median with 95% confidence or more
	// (MedianInterval); NaN with too few rounds.
	TGLow, TGHigh float64
	CPUPerToken   float64
	TracerCPU     float64
	TracerPeakRSS float64
	EventsPerSec  float64
	Dropped       float64 // total over the rounds
}

// Summarize reduces a configuration's rounds to its row. base are its baseline's runs in the
// same rounds (a baseline passes its own); nil leaves the ratios unmeasured.
func Summarize(config string, runs, base []Run) Row {
	pp := func(r Run) float64 { return r.PP }
	tg := func(r Run) float64 { return r.TG }
	tgRatios := ratios(column(runs, tg), column(base, tg))
	lo, hi := MedianInterval(tgRatios)
	return Row{
		Config:        config,
		PP:            Median(column(runs, pp)),
		TG:            Median(column(runs, tg)),
		PPRatio:       PairedRatio(column(runs, pp), column(base, pp)),
		TGRatio:       Median(tgRatios),
		TGLow:         lo,
		TGHigh:        hi,
		CPUPerToken:   Median(column(runs, func(r Run) float64 { return r.CPUPerToken })),
		TracerCPU:     Median(column(runs, func(r Run) float64 { return r.TracerCPU })),
		TracerPeakRSS: Median(column(runs, func(r Run) float64 { return r.TracerPeakRSS })),
		EventsPerSec:  Median(column(runs, func(r Run) float64 { return r.EventsPerSec })),
		Dropped:       total(column(runs, func(r Run) float64 { return r.Dropped })),
	}
}

func column(runs []Run, f func(Run) float64) []float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return xs
}

// measured is xs without its NaNs.
func measured(xs []float64) []float64 { return slices.DeleteFunc(slices.Clone(xs), math.IsNaN) }

// total is the sum of the measured values of xs, NaN if there are none.
func total(xs []float64) float64 {
	xs = measured(xs)
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// Median is the median of the measured (non-NaN) values of xs, NaN if there are none.
func Median(xs []float64) float64 {
	xs = measured(xs)
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[m-1] + xs[m]) / 2
	}
	return xs[m]
}

// PairedRatio is the median over rounds of xs[i]/base[i]. Rounds run their configurations
// back to back, so a round's ratio cancels the machine's drift between rounds, which
// a ratio of medians would not.
func PairedRatio(xs, base []float64) float64 { return Median(ratios(xs, base)) }

func ratios(xs, base []float64) []float64 {
	r := make([]float64, min(len(xs), len(base)))
	for i := range r {
		r[i] = xs[i] / base[i]
	}
	return r
}

// MedianInterval is a distribution-free confidence interval for the median of the
// population xs were drawn from: the k-th smallest and k-th largest of the measured
// values, with k the largest for which the chance that fewer than k fall below the median
// (a fair binomial) is at most 2.5%. It covers the median 95% of the time or more: 99.2%
// with 8 values (the extremes), 96.1% with 12 (the third from each end). NaN, NaN below 6
// values, where even the extremes fall short.
func MedianInterval(xs []float64) (lo, hi float64) {
	xs = measured(xs)
	n := len(xs)
	k, tail, p := 0, 0.0, math.Pow(0.5, float64(n)) // p: the chance of exactly j below
	for j := 0; tail+p <= 0.025; j++ {
		tail += p
		k = j + 1
		p *= float64(n-j) / float64(j+1)
	}
	if k == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(xs)
	return xs[k-1], xs[n-k]
}

// OverheadRatio is naive's decode loss divided by full's, where a loss is 1 - the decode
// ratio to the baseline: how many times more the naive peer costs than full tracing.
func OverheadRatio(naive, full Row) float64 { return (1 - naive.TGRatio) / (1 - full.TGRatio) }

// Order returns round k's order of xs: a shuffle seeded by k, so that the same rounds give
// the same orders. A rotation would keep each configuration's neighbours, and the run
// after a given one can be systematically faster or slower (page cache, frequency, the
// previous tracer's teardown): measured here, the run after the node-llama-cpp pair was
// about 8% faster every round.
func Order(xs []string, k int) []string {
	out := slices.Clone(xs)
	rand.New(rand.NewPCG(uint64(k), 0x70726f66)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Table formats rows as a markdown table; pp and tg are the workload's token counts.
func Table(rows []Row, pp, tg int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| config | pp%d t/s | tg%d t/s | pp ratio | tg ratio | tg ratio 95%% CI | target CPU ms/token | "+
		"tracer CPU %% of a core | tracer peak RSS MiB | events/s | drops |\n", pp, tg)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		ci := "—"
		if !math.IsNaN(r.TGLow) {
			ci = num(r.TGLow, 3) + "–" + num(r.TGHigh, 3)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Config,
			num(r.PP, 1), num(r.TG, 1), num(r.PPRatio, 3), num(r.TGRatio, 3), ci, num(1e3*r.CPUPerToken, 2),
			num(100*r.TracerCPU, 1), num(r.TracerPeakRSS/(1<<20), 0), num(r.EventsPerSec, 0), num(r.Dropped, 0))
	}
	return b.String()
}

// num formats x with prec decimals, or a dash when it was not measured.
func num(x float64, prec int) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

// CPUModel is the first "model name" in the text of /proc/cpuinfo, "unknown" if none.
func CPUModel(cpuinfo string) string {
	for line := range strings.Lines(cpuinfo) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
