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
//	go run ./internal/bench/cmd/alwayson -target server -rounds 12 -config internal/bench/cmd/alwayson/receiver-only.yaml
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/procfs"

	"github.com/profinfer/profinfer/internal/bench"
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
		for _, which := range bench.Order([]string{"off", "on"}, i) {
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

// bpfUse is what the kernel's BPF statistics say of the uprobe programs that ran.
type bpfUse struct {
	hits, retHits float64 // entry and return probe hits
	ns            float64 // program run time
	progs         map[string]progUse
}

// progUse is one program's runs and run time.
type progUse struct{ runs, ns float64 }

// Per-hit trap costs beyond the program, measured on these machines from a C loop (the
// project's BRIEF): an emulated uprobe about 1.1 µs, a return probe 0.5 µs more.
const (
	trapCost    = 1.1e-6
	retTrapCost = 0.5e-6
)

func (b bpfUse) trap() float64 { return (b.hits+b.retHits)*trapCost + b.retHits*retTrapCost }

func (b bpfUse) minus(o bpfUse) bpfUse {
	d := bpfUse{b.hits - o.hits, b.retHits - o.retHits, b.ns - o.ns, map[string]progUse{}}
	for name, p := range b.progs {
		d.progs[name] = progUse{p.runs - o.progs[name].runs, p.ns - o.progs[name].ns}
	}
	return d
}

// uprobeStats sums the statistics of every loaded uprobe program (kernel.bpf_stats_enabled
// must be 1). Return probes are the programs named *_exit, as the collector names them.
func uprobeStats() (bpfUse, error) {
	u := bpfUse{progs: map[string]progUse{}}
	ps, err := bench.Programs()
	for _, p := range ps {
		if p.Type != ebpf.Kprobe {
			continue
		}
		runs, ns := float64(p.Runs), float64(p.Runtime.Nanoseconds())
		if strings.HasSuffix(p.Name, "_exit") {
			u.retHits += runs
		} else {
			u.hits += runs
		}
		u.ns += ns
		pu := u.progs[p.Name]
		u.progs[p.Name] = progUse{pu.runs + runs, pu.ns + ns}
	}
	return u, err
}

// programTable is each program's hits a unit (token, transcription) and run time a hit,
// over the arms.
func programTable(as []arm, unit string) string {
	total, tokens := map[string]progUse{}, 0
	for _, a := range as {
		tokens += a.tokens
		for name, p := range a.bpf.progs {
			t := total[name]
			total[name] = progUse{t.runs + p.runs, t.ns + p.ns}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| program | hits a %s | ns a hit | µs a %s |\n|---|---:|---:|---:|\n", unit, unit)
	for _, name := range slices.Sorted(maps.Keys(total)) {
		if p := total[name]; p.runs > 0 {
			fmt.Fprintf(&b, "| %s | %.2f | %.0f | %.2f |\n", name, p.runs/float64(tokens), p.ns/p.runs, p.ns/1e3/float64(tokens))
		}
	}
	return b.String()
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

// server is a target that serves the same requests throughout.
type server interface {
	PID() int // the process that computes them
	// complete makes a request, and returns the tokens generated after the first and
	// their time, as the server timed them.
	complete(ctx context.Context) (tokens int, decode float64, err error)
	Stop()
}

// llamaServer is a llama-server generating tokens tokens a request.
type llamaServer struct {
	*testbench.Server
	tokens int
}

func (m *meter) startServer(ctx context.Context) error {
	s, err := m.env.StartServer(ctx, m.env.Bin("llama-server"), m.model, threads)
	if err != nil {
		return err
	}
	m.server = llamaServer{s, m.tokens}
	return warm(ctx, m.server)
}

// warm makes the first requests, which fault the weights in and size the buffers.
func warm(ctx context.Context, s server) error {
	for range 2 {
		if _, _, err := s.complete(ctx); err != nil {
			return err
		}
	}
	return nil
}

// timings are llama-server's own account of a request.
type timings struct {
	PredictedN  int     `json:"predicted_n"`
	PredictedMS float64 `json:"predicted_ms"`
}

func (s llamaServer) complete(ctx context.Context) (int, float64, error) {
	body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": s.tokens,
		"temperature": 0, "ignore_eos": true, "cache_prompt": false})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/completion", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("llama-server: %s", resp.Status)
	}
	var r struct {
		Timings timings `json:"timings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, 0, err
	}
	if r.Timings.PredictedN != s.tokens {
		return 0, 0, fmt.Errorf("llama-server generated %d tokens, want %d", r.Timings.PredictedN, s.tokens)
	}
	return r.Timings.PredictedN, r.Timings.PredictedMS / 1e3, nil
}

// usage is a process's CPU seconds and page faults so far, its exited threads' included.
func usage(pid int) (cpu, faults float64, err error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, 0, err
	}
	return st.CPUTime(), float64(st.MinFlt + st.MajFlt), nil
}

// serverArm sends the arm's requests to the running server.
func (m *meter) serverArm(ctx context.Context) (a arm, err error) {
	cpu0, faults0, err := usage(m.server.PID())
	if err != nil {
		return a, err
	}
	ipis0 := ipis()
	if m.sample {
		smp, serr := startSampling(m.server.PID())
		if serr != nil {
			return a, serr
		}
		defer smp.stopInto(ctx, &a, &err)
	}
	start := time.Now()
	for time.Since(start) < m.arm {
		tokens, decode, err := m.server.complete(ctx)
		if err != nil {
			return a, err
		}
		a.tokens += tokens
		a.decode += decode
	}
	a.wall = time.Since(start).Seconds()
	a.ipis = ipis() - ipis0
	cpu1, faults1, err := usage(m.server.PID())
	a.cpu, a.faults = cpu1-cpu0, faults1-faults0
	return a, err
}

// benchArm runs m.runs llama-bench decode tests, one process after another, each to
// completion. Its CPU time includes the models' loads, which are the same in both arms.
func (m *meter) benchArm(ctx context.Context) (a arm, err error) {
	ipis0 := ipis()
	start := time.Now()
	for range m.runs {
		if err := m.benchRun(ctx, &a); err != nil {
			return a, err
		}
	}
	a.wall = time.Since(start).Seconds()
	a.ipis = ipis() - ipis0
	return a, nil
}

// benchRun runs one llama-bench process and adds what it measured to a.
func (m *meter) benchRun(ctx context.Context, a *arm) (err error) {
	p, err := testbench.Start(m.env.Bin("llama-bench"), m.env.BenchArgs(m.model, 0, m.tokens, threads, m.reps)...)
	if err != nil {
		return err
	}
	if m.sample { // from the start: threads started later are sampled too
		smp, serr := startSampling(p.PID())
		if serr != nil {
			p.Stop()
			return serr
		}
		defer smp.stopInto(ctx, a, &err)
	}
	// llama-bench loads the model on one thread and starts the others at its first
	// graph: from then on the model needs every core, and the collector's CPU costs it.
	// Polled only until then, not beside the decode.
	var loadFrom time.Duration
	if m.collectorPID != 0 {
		loadFrom, _, _ = threadTotals(m.collectorPID)
	}
	for !p.Exited() && ctx.Err() == nil {
		if st, err := procfs.NewProc(p.PID()); err == nil {
			if stat, err := st.Stat(); err == nil && stat.NumThreads >= threads {
				if m.collectorPID != 0 {
					cpu, _, _ := threadTotals(m.collectorPID)
					a.loadCollector += (cpu - loadFrom).Seconds()
				}
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.Wait(ctx); err != nil {
		return err
	}
	rs, err := testbench.ParseBench(p.Stdout.Bytes())
	if err != nil {
		return err
	}
	if len(rs) != 1 || rs[0].AvgTS <= 0 {
		return fmt.Errorf("llama-bench: %d results, want 1", len(rs))
	}
	ru := p.Cmd.ProcessState.SysUsage().(*syscall.Rusage)
	tokens := m.tokens * m.reps
	a.tokens += tokens
	a.decode += float64(tokens) / rs[0].AvgTS
	a.cpu += (p.Cmd.ProcessState.UserTime() + p.Cmd.ProcessState.SystemTime()).Seconds()
	a.faults += float64(ru.Minflt + ru.Majflt)
	return nil
}

// collector is a running collector, or the calibration's spinner.
type collector struct {
	proc     *testbench.Process
	dir      string
	startCPU float64 // its CPU seconds until it attached to the server; 0 for bench
}

// settle is how long the collector runs before an arm: its start-up work (a roofline
// probe on idle CPUs, the garbage of its initialisation) is not the steady state.
const settle = 5 * time.Second

// startCollector starts the collector in a directory of its own (the default
// configuration writes its output file there) and waits until it is ready, and with a
// server, until it attached to it; then lets it settle.
func (m *meter) startCollector(ctx context.Context) (*collector, error) {
	dir, err := os.MkdirTemp("", "profinfer-alwayson-")
	if err != nil {
		return nil, err
	}
	if m.load > 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		p, err := testbench.Start(self, "-spin", strconv.FormatFloat(m.load, 'g', -1, 64))
		return &collector{proc: p, dir: dir}, err
	}
	logPath := filepath.Join(dir, "collector.log")
	p, err := testbench.Start("sh", "-c", `cd "$1" && exec env $5 "$2" --config "$3" >"$4" 2>&1`, "sh", dir, m.collector, m.config, logPath, m.collectorEnv)
	if err != nil {
		return nil, err
	}
	c := &collector{proc: p, dir: dir}
	ready := "Everything is ready"
	if m.server != nil {
		ready = fmt.Sprintf(`"pid": %d, "exe"`, m.server.PID())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, _ := os.ReadFile(logPath)
		if bytes.Contains(out, []byte(ready)) && bytes.Contains(out, []byte("Everything is ready")) {
			break
		}
		if p.Exited() || time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("collector not ready: %s", out)
		}
		select {
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if m.server != nil {
		cpu, _, _ := threadTotals(p.PID())
		c.startCPU = cpu.Seconds()
	}
	if m.warm {
		if err := m.warmUp(ctx); err != nil {
			p.Stop()
			return nil, err
		}
	}
	time.Sleep(settle)
	return c, nil
}

// under runs an arm under collector c and stops it.
func (m *meter) under(ctx context.Context, c *collector, run func(context.Context) (arm, error)) (arm, error) {
	defer os.RemoveAll(c.dir)
	defer c.proc.Stop()
	cpu0, sw0, _ := threadTotals(c.proc.PID())
	bpf0, err := uprobeStats()
	if err != nil {
		return arm{}, err
	}
	m.collectorPID = c.proc.PID()
	defer func() { m.collectorPID = 0 }()
	a, err := run(ctx)
	if err != nil {
		return a, err
	}
	cpu1, sw1, _ := threadTotals(c.proc.PID())
	bpf1, err := uprobeStats()
	// bench: what it spent while the models loaded is apart
	a.collector = (cpu1 - cpu0).Seconds() - a.loadCollector
	a.wakeups = sw1 - sw0
	a.bpf = bpf1.minus(bpf0)
	return a, err
}

// threadTotals is pid's threads' time on a CPU, to the nanosecond (schedstat), and their
// context switches, voluntary and not, so far; and how many threads it has.
func threadTotals(pid int) (onCPU time.Duration, switches float64, n int) {
	ts, _ := procfs.AllThreads(pid)
	for _, t := range ts {
		if st, err := t.Schedstat(); err == nil {
			onCPU += time.Duration(st.RunningNanoseconds)
		}
		if st, err := t.NewStatus(); err == nil {
			switches += float64(st.TotalCtxtSwitches())
		}
	}
	return onCPU, switches, len(ts)
}

// ipis is the TLB shootdowns and function-call interrupts every CPU has taken so far: a
// probe's breakpoint written into a mapped page, or taken out, shoots the page's old
// translation down on the CPUs running the model.
func ipis() float64 {
	b, _ := os.ReadFile("/proc/interrupts")
	var n float64
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "TLB:" && f[0] != "CAL:") {
			continue
		}
		for _, c := range f[1:] {
			x, err := strconv.ParseFloat(c, 64)
			if err != nil {
				break
			}
			n += x
		}
	}
	return n
}

// spinFor keeps share of one core busy, in slices of a scheduler tick, until killed.
func spinFor(share float64) {
	const slice = 10 * time.Millisecond
	busy := time.Duration(share * float64(slice))
	for {
		start := time.Now()
		for time.Since(start) < busy {
		}
		time.Sleep(slice - busy)
	}
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
		return bench.Median(xs)
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
		lo, hi := bench.MedianInterval(rs)
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.4f | %.4f–%.4f | %s |\n", row.name, med(off, row.f), med(on, row.f),
			bench.Median(rs), lo, hi, verdict(lo, hi, 1+bound))
	}
	if m.load == 0 {
		// The accounted cost of each arm with the collector, against the decode time of the
		// same round's arm without.
		rs := perRound(func(on, off arm) float64 { return on.accounted() / (off.decode / float64(off.tokens)) })
		lo, hi := bench.MedianInterval(rs)
		fmt.Fprintf(&b, "| accounted cost, share of decode | — | %.3f ms/%s | %.4f%% | %.4f%%–%.4f%% | %s |\n",
			1e3*med(on, arm.accounted), unit, 100*bench.Median(rs), 100*lo, 100*hi, verdict(lo, hi, bound))
		// And against the target's CPU time without: each of its threads pays the probes it
		// hits, and spins at the next barrier while a partner waits for the collector.
		rs = perRound(func(on, off arm) float64 { return on.accounted() / (off.cpu / float64(off.tokens)) })
		lo, hi = bench.MedianInterval(rs)
		fmt.Fprintf(&b, "| accounted cost, share of the target's CPU | — | %.3f ms/%s | %.4f%% | %.4f%%–%.4f%% | %s |\n",
			1e3*med(on, arm.accounted), unit, 100*bench.Median(rs), 100*lo, 100*hi, verdict(lo, hi, bound))
	}
	perTok := func(f func(arm) float64) func(arm) float64 {
		return func(a arm) float64 { return f(a) / float64(a.tokens) }
	}
	share := med(on, func(a arm) float64 { return a.collector / a.wall })
	if m.load > 0 {
		loss := perRound(func(on, off arm) float64 { return on.msPerToken()/off.msPerToken() - 1 })
		lo, hi := bench.MedianInterval(loss)
		fmt.Fprintf(&b, "\nCalibration: a spinner busy %.2f%% of a core cost decode %.2f%% (95%% CI %.2f%%–%.2f%%): %.2f of decode time per unit of a core's time.\n",
			100*share, 100*bench.Median(loss), 100*lo, 100*hi, bench.Median(loss)/share)
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
			1e3*bench.Median(starts), 1e3*starts[0], 1e3*starts[len(starts)-1])
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
- command: go run ./internal/bench/cmd/alwayson %s
`, len(off), o.target, m.model, threads, m.tokens, m.reps, m.arm, time.Now().UTC().Format("2006-01-02 15:04 MST"),
		strings.TrimSpace(string(host)), bench.CPUModel(string(cpuinfo)), runtime.NumCPU(), o.command)
	return b.String()
}
