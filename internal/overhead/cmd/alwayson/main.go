// Command alwayson measures what the collector costs a model in steady state, and accounts
// for it term by term, finely enough to tell 0.5% from nothing on a noisy 2-core machine.
//
// Target server: one llama-server serves the same requests throughout; rounds alternate,
// in an order shuffled per round, an arm without the collector and an arm with it, started
// beforehand and settled, so that its start and attach stay outside the arm. Target bench:
// a llama-bench process per arm (-runs: several, one after another, as a loop runs them),
// attached to as it starts by a collector started and settled beforehand, as a collector
// already running pays it per process. With -warm,
// the collector has seen the binary before, in a short llama-bench process of its own:
// it parsed the libraries' symbol tables then, as a collector running for a while has.
//
// Per arm it takes the target's decode time per token (llama-server's own timings, or
// llama-bench's), its CPU time per token (/proc/PID/stat, which keeps exited threads'
// time), its page faults, the machine's TLB shootdowns and call IPIs, the collector's CPU
// to the nanosecond and its context switches, and each probe program's hits and run time
// from the kernel's BPF statistics. Alternating arms differ by ±10% here, so the ratios'
// intervals stay wide; the accounted cost (the collector's CPU, the programs' run time and
// their traps) is what the noise does not reach. -load calibrates it: a process keeping a
// known share of a core busy in the collector's place.
//
// It needs root and runs from the repository root after `make testenv build`:
//
//	go run ./internal/overhead/cmd/alwayson -target server -rounds 12 -config internal/overhead/cmd/alwayson/receiver-only.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/profinfer/profinfer/internal/overhead"
	"github.com/profinfer/profinfer/internal/testbench"
)

const threads = 2

func main() {
	log.SetFlags(0)
	log.SetPrefix("alwayson: ")
	var o options
	flag.StringVar(&o.target, "target", "server", "server (llama-server in steady state), ollama (Ollama's runner in steady state, "+
		"requests through its API), bench (a llama-bench process per arm) or whisper (a whisper.cpp addon's process per arm)")
	flag.IntVar(&o.rounds, "rounds", 20, "alternating rounds")
	flag.StringVar(&o.model, "model", "llama-1b-q4_0", "test bench model")
	config := flag.String("config", "config/otelcol.yaml", "the collector's configuration")
	flag.StringVar(&o.collectorEnv, "env", "", "the collector's environment beyond this one's: NAME=value, space-separated (deploy/'s settings: GOMAXPROCS=1)")
	flag.DurationVar(&o.arm, "arm", 20*time.Second, "server: how long an arm sends requests; two sampling windows by default")
	flag.IntVar(&o.tokens, "tokens", 64, "tokens generated per request, or per llama-bench run")
	flag.BoolVar(&o.sample, "sample", false, "sample the target's CPU in every arm (perf record), to measure the probes' traps rather than estimate them")
	flag.BoolVar(&o.warm, "warm", true, "bench: a short llama-bench process under each arm's collector before its settle, so that the arm's process is not the first of its binary")
	flag.IntVar(&o.reps, "reps", 2, "bench: llama-bench's repetitions of its run in one process (-r), as the issue's held-out method has it; whisper: transcriptions in one process")
	flag.IntVar(&o.runs, "runs", 1, "bench: llama-bench processes an arm, one after another with the same arguments, as a loop runs them")
	flag.Float64Var(&o.bound, "bound", 0.005, "the cost to test for, as a fraction")
	out := flag.String("o", "", "also write the report to this file")
	flag.Float64Var(&o.load, "load", 0, "calibration: instead of the collector, a process that keeps this share of one core busy")
	spin := flag.Float64("spin", 0, "run as that process (internal)")
	flag.Parse()
	if *spin > 0 {
		spinFor(*spin)
	}
	o.command = strings.Join(os.Args[1:], " ")
	var err error
	if o.collector, err = filepath.Abs("bin/otelcol-profinfer"); err == nil {
		_, err = os.Stat(o.collector)
	}
	if err != nil {
		log.Fatalf("%v; run `make build` and run this from the repository root", err)
	}
	if o.config, err = filepath.Abs(*config); err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := run(ctx, o, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// options are what to measure, and how long.
type options struct {
	target, model     string
	collector, config string // the collector's executable and configuration
	collectorEnv      string // NAME=value pairs added to its environment
	rounds, tokens    int
	reps, runs        int
	sample, warm      bool
	arm               time.Duration
	bound, load       float64
	command           string // the arguments, for the report
}

// run measures o.rounds alternating rounds, writes each arm's figures to progress, and
// returns the report.
func run(ctx context.Context, o options, progress io.Writer) (string, error) {
	// The kernel's per-program statistics: run counts and times of the probes.
	const stats = "/proc/sys/kernel/bpf_stats_enabled"
	if err := os.WriteFile(stats, []byte("1"), 0o644); err != nil {
		return "", fmt.Errorf("enabling BPF statistics: %w", err)
	}
	defer os.WriteFile(stats, []byte("0"), 0o644)
	env, err := testbench.Find()
	if err != nil {
		return "", err
	}
	m := &meter{env: env, model: o.model, arm: o.arm, tokens: o.tokens, reps: o.reps, runs: max(o.runs, 1), sample: o.sample, load: o.load,
		warm:      o.warm && (o.target == "bench" || o.target == "whisper"),
		collector: o.collector, config: o.config, collectorEnv: o.collectorEnv}
	var measure func(context.Context) (arm, error)
	switch o.target {
	case "server", "ollama":
		start := m.startServer
		if o.target == "ollama" {
			start = m.startOllama
		}
		if err := start(ctx); err != nil {
			return "", err
		}
		defer m.server.Stop()
		measure = m.serverArm
	case "bench":
		measure = m.benchArm
	case "whisper":
		measure = m.whisperArm
	default:
		return "", fmt.Errorf("unknown target %q: want server, ollama, bench or whisper", o.target)
	}
	var off, on []arm
	var starts []float64
	for i := range o.rounds {
		for _, which := range overhead.Order([]string{"off", "on"}, i) {
			if which == "off" {
				a, err := measure(ctx)
				if err != nil {
					return "", fmt.Errorf("round %d, off: %w", i+1, err)
				}
				off = append(off, a)
				fmt.Fprintf(progress, "round %d/%d off %v\n", i+1, o.rounds, a)
				continue
			}
			c, err := m.startCollector(ctx)
			if err != nil {
				return "", fmt.Errorf("round %d: %w", i+1, err)
			}
			a, err := m.under(ctx, c, measure)
			if err != nil {
				return "", fmt.Errorf("round %d, on: %w", i+1, err)
			}
			on = append(on, a)
			if c.startCPU > 0 {
				starts = append(starts, c.startCPU)
			}
			fmt.Fprintf(progress, "round %d/%d on  %v (collector start: %.0f ms CPU)\n", i+1, o.rounds, a, 1e3*c.startCPU)
		}
	}
	return m.report(o, off, on, starts), nil
}

// arm is what one arm measured.
type arm struct {
	tokens    int
	decode    float64 // seconds of decode, by the target's own clock
	cpu       float64 // the target's CPU seconds
	faults    float64 // the target's minor and major page faults
	ipis      float64 // TLB shootdowns and function-call interrupts, machine-wide
	wall      float64 // seconds
	collector float64 // the collector's CPU seconds, to the nanosecond; 0 without it
	// bench: the collector's CPU seconds while llama-bench loaded its model on one
	// thread (the attach, mostly), apart from collector, which is from its first graph on
	loadCollector float64
	wakeups       float64 // the collector's context switches, all threads
	bpf           bpfUse  // the collector's programs, run in the target's threads
	// With -sample: the target's CPU samples, and those in the uprobe path.
	samples, inPath int
}

// path is the target's CPU seconds in the uprobe path, traps and programs, as sampled;
// 0 if not sampled.
func (a arm) path() float64 {
	if a.samples == 0 {
		return 0
	}
	return a.cpu * float64(a.inPath) / float64(a.samples)
}

// probes is the probes' cost in the model's threads: as sampled if it was, else the
// programs' run time and their traps estimated per hit.
func (a arm) probes() float64 {
	if a.samples > 0 {
		return max(a.path(), a.bpf.ns/1e9)
	}
	return a.bpf.ns/1e9 + a.bpf.trap()
}

func (a arm) msPerToken() float64  { return 1e3 * a.decode / float64(a.tokens) }
func (a arm) cpuPerToken() float64 { return 1e3 * a.cpu / float64(a.tokens) }

// accounted is the arm's cost to the model per token in seconds, term by term as far as
// it is measured directly: the collector's CPU, each ms of which a model thread that
// needs every core waits (the calibration, -load, checks that), and the programs' run
// time and traps in the model's own threads.
func (a arm) accounted() float64 {
	return (a.collector + a.probes()) / float64(a.tokens)
}

func (a arm) String() string {
	s := fmt.Sprintf("%d tokens, %.2f ms/token, %.2f CPU ms/token, %.0f faults", a.tokens, a.msPerToken(), a.cpuPerToken(), a.faults)
	if a.collector > 0 {
		s += fmt.Sprintf(", collector %.2f%% of a core, %.1f wakeups/s, %.1f probe hits and %.1f µs of program a token",
			100*a.collector/a.wall, a.wakeups/a.wall, (a.bpf.hits+a.bpf.retHits)/float64(a.tokens), a.bpf.ns/1e3/float64(a.tokens))
	}
	return s
}

type meter struct {
	env       *testbench.Env
	model     string
	arm       time.Duration // server: how long an arm sends requests
	tokens    int
	reps      int    // bench: llama-bench's -r
	runs      int    // bench: llama-bench processes an arm
	sample    bool   // sample the target's CPU in each arm
	warm      bool   // bench: a warm-up process under each collector before its arm
	collector string // bin/otelcol-profinfer
	config    string
	// collectorEnv is added to the collector's environment: NAME=value, space-separated
	collectorEnv string
	server       server  // server, ollama: the target
	load         float64 // calibration: a spinner's share of a core instead of the collector
	// collectorPID is the collector's while an arm runs under it; 0 otherwise
	collectorPID int
}

func (m *meter) report(o options, off, on []arm, starts []float64) string {
	bound := o.bound
	perRound := func(f func(on, off arm) float64) []float64 {
		rs := make([]float64, len(off))
		for i := range off {
			rs[i] = f(on[i], off[i])
		}
		return rs
	}
	med := func(as []arm, f func(arm) float64) float64 {
		xs := make([]float64, len(as))
		for i, a := range as {
			xs[i] = f(a)
		}
		return overhead.Median(xs)
	}
	verdict := func(lo, hi, limit float64) string {
		switch {
		case hi <= limit:
			return "yes"
		case lo > limit:
			return "no"
		}
		return "cannot tell"
	}
	unit := "token" // what the target's figures are per: a whisper process's are per transcription
	if o.target == "whisper" {
		unit = "transcription"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| measure | without | with | per round (median) | 95%% CI | within %.1f%% |\n|---|---:|---:|---:|---:|---|\n", 100*bound)
	for _, row := range []struct {
		name string
		f    func(arm) float64
	}{{"decode ms/" + unit + ", ratio", arm.msPerToken}, {"target CPU ms/" + unit + ", ratio", arm.cpuPerToken}} {
		rs := perRound(func(on, off arm) float64 { return row.f(on) / row.f(off) })
		lo, hi := overhead.MedianInterval(rs)
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.4f | %.4f–%.4f | %s |\n", row.name, med(off, row.f), med(on, row.f),
			overhead.Median(rs), lo, hi, verdict(lo, hi, 1+bound))
	}
	if m.load == 0 {
		// The accounted cost of each arm with the collector, against the decode time of the
		// same round's arm without.
		rs := perRound(func(on, off arm) float64 { return on.accounted() / (off.decode / float64(off.tokens)) })
		lo, hi := overhead.MedianInterval(rs)
		fmt.Fprintf(&b, "| accounted cost, share of decode | — | %.3f ms/%s | %.4f%% | %.4f%%–%.4f%% | %s |\n",
			1e3*med(on, arm.accounted), unit, 100*overhead.Median(rs), 100*lo, 100*hi, verdict(lo, hi, bound))
		// And against the target's CPU time without: each of its threads pays the probes it
		// hits, and spins at the next barrier while a partner waits for the collector.
		rs = perRound(func(on, off arm) float64 { return on.accounted() / (off.cpu / float64(off.tokens)) })
		lo, hi = overhead.MedianInterval(rs)
		fmt.Fprintf(&b, "| accounted cost, share of the target's CPU | — | %.3f ms/%s | %.4f%% | %.4f%%–%.4f%% | %s |\n",
			1e3*med(on, arm.accounted), unit, 100*overhead.Median(rs), 100*lo, 100*hi, verdict(lo, hi, bound))
	}
	perTok := func(f func(arm) float64) func(arm) float64 {
		return func(a arm) float64 { return f(a) / float64(a.tokens) }
	}
	share := med(on, func(a arm) float64 { return a.collector / a.wall })
	if m.load > 0 {
		loss := perRound(func(on, off arm) float64 { return on.msPerToken()/off.msPerToken() - 1 })
		lo, hi := overhead.MedianInterval(loss)
		fmt.Fprintf(&b, "\nCalibration: a spinner busy %.2f%% of a core cost decode %.2f%% (95%% CI %.2f%%–%.2f%%): %.2f of decode time per unit of a core's time.\n",
			100*share, 100*overhead.Median(loss), 100*lo, 100*hi, overhead.Median(loss)/share)
	} else {
		fmt.Fprintf(&b, "\nPer "+unit+", medians with the collector: collector CPU %.1f µs (%.2f%% of a core), %.2f collector wakeups; "+
			"%.1f probe hits (%.1f return probes), %.1f µs of program and %.1f µs of traps (estimated) in the model's threads; "+
			"target page faults %.3f (without: %.3f), TLB shootdowns and function-call interrupts %.2f (without: %.2f).\n",
			1e6*med(on, perTok(func(a arm) float64 { return a.collector })), 100*share,
			med(on, perTok(func(a arm) float64 { return a.wakeups })),
			med(on, perTok(func(a arm) float64 { return a.bpf.hits + a.bpf.retHits })),
			med(on, perTok(func(a arm) float64 { return a.bpf.retHits })),
			med(on, perTok(func(a arm) float64 { return a.bpf.ns / 1e3 })),
			med(on, perTok(func(a arm) float64 { return 1e6 * a.bpf.trap() })),
			med(on, perTok(func(a arm) float64 { return a.faults })), med(off, perTok(func(a arm) float64 { return a.faults })),
			med(on, perTok(func(a arm) float64 { return a.ipis })), med(off, perTok(func(a arm) float64 { return a.ipis })))
	}
	if m.sample && m.load == 0 {
		var samples, inPath, offPath int
		for i := range on {
			samples, inPath, offPath = samples+on[i].samples, inPath+on[i].inPath, offPath+off[i].inPath
		}
		path := perTok(arm.path)
		traps := perTok(func(a arm) float64 { return a.path() - a.bpf.ns/1e9 })
		fmt.Fprintf(&b, "\nThe target sampled (perf record -e cpu-clock -F %d -g, every arm): %d of %d samples with the collector in the uprobe path "+
			"(%d without it). Per token, medians: the uprobe path %.1f µs, of which programs %.1f µs and traps %.1f µs "+
			"(the per-hit estimate: %.1f µs). The accounted cost uses the sampled path.\n",
			sampleRate, inPath, samples, offPath, 1e6*med(on, path), med(on, perTok(func(a arm) float64 { return a.bpf.ns / 1e3 })),
			1e6*med(on, traps), med(on, perTok(func(a arm) float64 { return 1e6 * a.bpf.trap() })))
	}
	if m.load == 0 {
		b.WriteString("\nThe probes, over every arm with the collector (the kernel's BPF statistics):\n\n" + programTable(on, unit))
	}
	if o.target == "bench" && m.load == 0 { // llama-bench alone loads its model on one thread
		fmt.Fprintf(&b, "\nThe collector's CPU while llama-bench loaded the model on one thread (the attach, mostly; not in the accounted cost): median %.1f ms a process.\n",
			1e3*med(on, func(a arm) float64 { return a.loadCollector })/float64(m.runs))
	}
	if len(starts) > 0 {
		slices.Sort(starts)
		fmt.Fprintf(&b, "\nCollector start beside the idle server, CPU until attached: median %.0f ms (%.0f–%.0f).\n",
			1e3*overhead.Median(starts), 1e3*starts[0], 1e3*starts[len(starts)-1])
	}
	if o.target == "bench" {
		seen := "the first of its binary that the collector saw (-warm=false)"
		if m.warm {
			seen = "not the first of its binary: a one-token llama-bench process ran under the collector before its settle"
		}
		fmt.Fprintf(&b, "\nEach arm ran %d llama-bench process(es) one after another, with the same arguments; its first was %s.\n", m.runs, seen)
	}
	host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	fmt.Fprintf(&b, `
%d rounds, target %s, model %s, %d threads, %d tokens a request or run, %d runs a llama-bench process (server: requests for %v an arm).
Per round: the arm with the collector over the arm without, its accounted cost over the
decode time without; intervals are the distribution-free ones for a median.

- date: %s
- kernel: %s
- CPU: %s, %d CPUs
- command: go run ./internal/overhead/cmd/alwayson %s
`, len(off), o.target, m.model, threads, m.tokens, m.reps, m.arm, time.Now().UTC().Format("2006-01-02 15:04 MST"),
		strings.TrimSpace(string(host)), overhead.CPUModel(string(cpuinfo)), runtime.NumCPU(), o.command)
	return b.String()
}
