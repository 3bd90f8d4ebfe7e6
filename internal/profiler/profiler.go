// Package profiler runs profinfer: it loads the eBPF programs, keeps the set of traced
// processes current, reads the ring buffer, and hands assembled spans and metrics to the
// collector's consumers. The receiver package is a thin shell around it.
//
// Its state has one owner a goroutine, and none is shared under a lock:
//   - the reader (read.go) owns ingest: the processes as events describe them, the
//     assembler, the spans and metrics being built, the requests (ingest.go);
//   - the controller (control.go) owns what is attached: each process's probes, the
//     sampling windows, the search for model files;
//   - the registry's goroutine finds processes and calls Trace, Extend and Retire.
//
// They talk over channels. The reader posts effects to the controller and never waits on
// it; the controller and the registry hand the reader commands that it runs between two
// records, so that no probe attach, the slowest thing profinfer does, holds it up.
package profiler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/procfs"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/cpus"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/registry"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/ringread"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/signals"
	"github.com/profinfer/profinfer/internal/simd"
	"github.com/profinfer/profinfer/internal/timerslack"
	"github.com/profinfer/profinfer/internal/watch"
	"github.com/profinfer/profinfer/internal/window"
)

// Profiler is one running profinfer.
type Profiler struct {
	cfg     Config
	set     receiver.Settings
	log     *zap.Logger
	traces  consumer.Traces
	metrics consumer.Metrics

	bpf      *probe.Loaded
	kernel   string         // its release, read once: every process's os.version
	hostSIMD string         // the CPU's SIMD, read once: every process's host.cpu.simd
	top      *cpus.Topology // the CPUs' topology, read once; nil where it could not be
	tps      []link.Link    // the tracepoint programs
	reader   *ringread.Reader
	reg      *registry.Registry
	counters *perfcount.Threads // nil: no perf counters
	watch    *watch.Watcher     // nil: the process hooks could not attach; discovery polls

	in    *ingest     // the reader's
	ctl   *controller // the controller's
	quota quotas      // the metrics goroutine's
	// procFS reads /proc/stat, for how idle the targets' CPUs sat; idleWarned says that
	// a failure was logged.
	procFS     procfs.FS
	idleWarned atomic.Bool
	ends       ends // the registry goroutine's

	cmds       chan func(*ingest) // commands for the reader (do, ask)
	calls      chan func()        // calls for the controller (call)
	effects    chan []effect      // what the reader asks of the controller
	readerDone chan struct{}      // closed when the reader has returned
	shown      atomic.Pointer[shown]

	// out queues span batches for the exporting goroutine, so that a slow pipeline never
	// holds up the reader; exportCtx ends what that goroutine and the metrics ticker hand
	// the pipeline when Shutdown runs out of time.
	out          chan ptrace.Traces
	exportCtx    context.Context
	cancelExport context.CancelFunc
	exported     sync.WaitGroup

	stop chan struct{}
	wg   sync.WaitGroup
}

// probeKernel finds what the kernel serves; a test stands in one without uprobe_multi.
var probeKernel = probe.ProbeKernel

// requestIdle is how long a generating request goes without a decode before it is over:
// a client that went away, or an engine waiting for its next prompt.
const requestIdle = time.Second

// shutdownGrace bounds how long Shutdown waits for the pipeline to take what is queued.
const shutdownGrace = 2 * time.Second

// exportQueue is how many span batches (of up to maxPending spans) wait for a busy
// pipeline before more are dropped: about a second of full tracing, which the reader
// builds in a burst when it drains the ring buffer (the file exporter, writing JSON,
// took 2 of them too few).
const exportQueue = 8

// New returns a profiler that delivers to the given consumers, either of which may be nil.
func New(cfg Config, set receiver.Settings, traces consumer.Traces, metrics consumer.Metrics) *Profiler {
	p := &Profiler{cfg: withCounters(cfg, set.Logger), set: set, log: set.Logger, traces: traces, metrics: metrics,
		cmds: make(chan func(*ingest), 64), calls: make(chan func()), effects: make(chan []effect, 1),
		readerDone: make(chan struct{}), stop: make(chan struct{}), out: make(chan ptrace.Traces, exportQueue)}
	p.exportCtx, p.cancelExport = context.WithCancel(context.Background())
	return p
}

// Start loads the eBPF programs, attaches to the targets present now and starts the
// background loops. Errors about single targets fail Start only when cfg.Propagate is set.
func (p *Profiler) Start(ctx context.Context) error {
	slackSet := p.setTimerSlack() // first: the start's own work wakes the runtime's monitor too
	p.hostSIMD = simd.Host()
	p.top = readTopology(p.log)
	p.procFS, _ = procfs.NewFS("/proc") // it only checks that the directory is there: a failed read is warned of
	reg, err := registry.New(registry.Config{Targets: p.cfg.Targets, Root: "/proc",
		Application: p.cfg.Layers.Application, Propagate: p.cfg.Propagate}, p, p.log)
	if err != nil {
		return err
	}
	p.reg = reg
	// The kernel's BTF, decoded once for every load here, and let go after them.
	types := btf.NewCache()
	if err := p.load(types); err != nil {
		return err
	}
	slackSet() // once profinfer has what it needs, not before a privilege error
	var real unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	roofs := p.roofs()
	ctr := signals.NewCounters(p.cfg.Counters)
	spans := signals.NewSpans(signals.Clock{Offset: real.Nano() - int64(monotonic())}, p.cfg.NodeSpans, roofs.Peaks, ctr)
	spans.Resources = p.cfg.Metrics.ResourceAttributes
	p.in = newIngest(&p.cfg, p.log, p.traces != nil, p.counters != nil, p.out, spans,
		signals.NewMetrics(p.cfg.Metrics, p.set, roofs, ctr))
	p.ctl = &controller{procs: map[int]*ctlProc{}, pool: probe.NewPool(), windows: window.New(p.cfg.Nodes.Interval, time.Now)}
	// The hooks go first, so that a process started during the first scan is noticed.
	p.watch, err = watch.Open(p.bpf.Traced, types, p.bpf.Multi())
	switch {
	case p.watch == nil:
		p.log.Warn("process hooks unavailable: new targets are found only by scanning /proc every discovery_interval",
			zap.Duration("discovery_interval", p.cfg.DiscoveryInterval), zap.Error(err))
	case err != nil:
		p.log.Warn("dynamic loader hook unavailable: a library loaded with dlopen is found by the scan of /proc every discovery_interval",
			zap.Duration("discovery_interval", p.cfg.DiscoveryInterval), zap.Error(err))
	}
	// The reader and the controller first: the first scan's Trace calls on both.
	p.exported.Add(1)
	go p.exportLoop()
	p.wg.Add(2)
	go p.readLoop()
	go p.controlLoop()
	if err := p.reg.Scan(true); err != nil {
		p.stopLoops()
		close(p.out)
		p.exported.Wait()
		p.close()
		return err
	}
	p.wg.Add(2)
	if p.watch != nil {
		go func() {
			defer p.wg.Done()
			p.reg.Watch(p.watch, p.cfg.DiscoveryInterval)
		}()
	} else {
		go p.every(p.cfg.DiscoveryInterval, func() { _ = p.reg.Scan(false) })
	}
	go p.every(p.cfg.CollectionInterval, func() { p.emitMetrics(p.exportCtx) })
	return nil
}

func (p *Profiler) load(types *btf.Cache) error {
	k, err := probeKernel(types)
	if err != nil {
		return fmt.Errorf("profinfer: %w", err)
	}
	p.kernel = k.Release
	// Once, at start: what this kernel cannot serve, and what that costs.
	for _, d := range k.Degraded() {
		p.log.Warn("kernel "+k.Release+": "+d, zap.String("kernel", k.Release))
	}
	l, err := probe.Load(probe.LoadConfig{
		RingBufferSize: p.cfg.RingBufferSize,
		AllThreads:     p.cfg.Layers.Barriers || p.cfg.Layers.Counters,
		FollowSched:    p.cfg.Layers.Scheduler,
		AllTraced:      p.cfg.Nodes.Mode == NodesAll,
		Counters:       len(p.cfg.Counters),
	}, k, types)
	if err != nil {
		return fmt.Errorf("profinfer: %w", err)
	}
	p.bpf = l
	if p.reader, err = ringread.NewReader(l.Events); err != nil {
		l.Close()
		return fmt.Errorf("profinfer: opening the ring buffer: %w", err)
	}
	if p.cfg.Layers.Counters {
		if p.counters, err = perfcount.NewThreads(p.cfg.Counters, probe.CounterTable(l.Counters, &l.ProfinferMaps)); err != nil {
			p.close()
			return fmt.Errorf("profinfer: %w", err)
		}
	}
	layers := probe.Layers{Runtime: p.cfg.Layers.Runtime, Scheduler: p.cfg.Layers.Scheduler, Counters: p.cfg.Layers.Counters}
	if p.tps, err = probe.Tracepoints(&l.ProfinferPrograms, layers); err != nil {
		p.close()
		return fmt.Errorf("profinfer: %w", err)
	}
	return nil
}

// setTimerSlack gives the collector's threads cfg.TimerSlack (internal/timerslack), and
// returns what logs the outcome.
func (p *Profiler) setTimerSlack() (report func()) {
	if p.cfg.TimerSlack <= 0 {
		return func() {}
	}
	set, threads, err := timerslack.Set(p.cfg.TimerSlack)
	fields := []zap.Field{zap.Duration("timer_slack", p.cfg.TimerSlack), zap.Int("threads_set", set), zap.Int("threads", threads)}
	return func() {
		switch {
		case err == nil:
			p.log.Debug("timer slack set", fields...)
		case errors.Is(err, timerslack.ErrPrivilege):
			p.log.Info("timer slack set on part of the collector's threads: the others keep the kernel's default and wake more often on the model's cores",
				append(fields, zap.Error(err))...)
		default:
			p.log.Warn("timer slack not set", append(fields, zap.Error(err))...)
		}
	}
}

// withCounters keeps of cfg's perf counters those this machine has, says once which it
// lacks and why, and has the counters layer where some are left and nodes are traced.
func withCounters(cfg Config, log *zap.Logger) Config {
	cfg.Layers.Counters = false
	if len(cfg.Counters) == 0 {
		return cfg
	}
	ok, missing := perfcount.Detect(cfg.Counters)
	if len(missing) > 0 {
		log.Warn("perf counters unavailable, continuing without them: "+strings.Join(missing, "; "),
			zap.Int("available", len(ok)))
	}
	cfg.Counters = ok
	cfg.Layers.Counters = len(ok) > 0 && (cfg.Nodes.Mode == NodesSampled || cfg.Nodes.Mode == NodesAll)
	return cfg
}

// roofs returns the roofline to classify nodes under, measuring what the configuration
// leaves unset, or taking it from the state file; zero when classification is off.
func (p *Profiler) roofs() roofline.Roofs {
	r := p.cfg.Roofline
	if !r.Enabled {
		return roofline.Roofs{}
	}
	roofs := roofline.Establish(roofline.EstablishConfig{Peaks: r.Peaks, Probe: r.Probe, StateFile: r.StateFile, KeepFinal: r.KeepFinal}, p.log)
	dot, bf16 := roofline.DotKernel()
	p.log.Info("roofline", zap.Float64("peak_flops", roofs.FLOPS), zap.Float64("peak_int8", roofs.Int8),
		zap.Float64("peak_bf16", roofs.BF16), zap.Float64("peak_bandwidth", roofs.Bandwidth), zap.Any("caches", roofs.Levels),
		zap.String("source", roofs.Source), zap.Time("at", roofs.At), zap.Int("trials", roofs.Trials),
		zap.Bool("provisional", roofs.Provisional), zap.String("fma", roofline.FMAKernel()), zap.String("int8", dot),
		zap.String("bf16", bf16))
	return roofs
}

// Shutdown stops the loops, detaches every probe, unloads the programs and flushes what
// was assembled.
func (p *Profiler) Shutdown(ctx context.Context) error {
	select {
	case <-p.stop:
		return nil
	default:
	}
	// A pipeline that hangs (an exporter down, blocking) is cut off when ctx ends, or
	// after shutdownGrace: the collector's own shutdown context has no deadline.
	defer context.AfterFunc(ctx, p.cancelExport)()
	defer time.AfterFunc(shutdownGrace, p.cancelExport).Stop()
	if p.in == nil { // Start failed or never ran
		close(p.stop)
		p.close()
		return nil
	}
	if p.watch != nil {
		p.watch.Close()
		p.watch = nil
	}
	p.stopLoops()
	// Every loop has returned: what they owned is Shutdown's now.
	in := p.in
	for _, t := range in.procs { // decodes still waiting for a lookup
		t.looking = false
		in.release(t)
		in.endRequests(t, requests.Stopped)
	}
	p.flush()
	close(p.out)
	p.exported.Wait()
	p.emit(ctx, in)
	p.close()
	p.cancelExport()
	return nil
}

// stopLoops stops the goroutines; the reader drains the ring buffer first.
func (p *Profiler) stopLoops() {
	close(p.stop)
	if err := p.reader.Flush(); err != nil {
		p.reader.Close()
	}
	p.wg.Wait()
}

func (p *Profiler) close() {
	if c := p.ctl; c != nil {
		for pid, t := range c.procs {
			t.attachment.Close()
			delete(c.procs, pid)
		}
		if c.conns != nil {
			c.conns.Close()
		}
		c.pool.Close()
		p.shown.Store(&shown{})
	}
	for _, l := range p.tps {
		l.Close()
	}
	if p.watch != nil {
		p.watch.Close()
	}
	if p.counters != nil {
		_ = p.counters.Sweep(func(uint32, uint32) bool { return false })
	}
	if p.reader != nil {
		p.reader.Close()
	}
	if p.bpf != nil {
		p.bpf.Close()
	}
	if p.reg != nil {
		p.reg.Files.Close()
	}
}

// ProbesAttached is the number of probes attached, as the controller last counted them.
func (p *Profiler) ProbesAttached() int {
	if s := p.shown.Load(); s != nil {
		return s.probes
	}
	return 0
}

func (p *Profiler) drops() uint64 {
	var per []uint64
	if err := p.bpf.Drops.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// every runs f every interval until Shutdown.
func (p *Profiler) every(interval time.Duration, f func()) {
	defer p.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			f()
		}
	}
}

// busy marks the collector's own work from now until done is called (assemble's Busy):
// the graphs that run meanwhile share their CPUs with it, and no verdict of starved uses
// them. Not for the reader, whose own work is not marked.
func (p *Profiler) busy() (done func()) {
	since := monotonic()
	p.do(func(in *ingest) { in.asm.Busy(since) })
	return func() {
		until := monotonic()
		p.do(func(in *ingest) { in.asm.Idle(until) })
	}
}

// monotonic is CLOCK_MONOTONIC in nanoseconds, the clock of bpf_ktime_get_ns.
func monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
