// Package profiler runs profinfer: it loads the eBPF programs, keeps the set of traced
// processes current, reads the ring buffer, and hands assembled spans and metrics to the
// collector's consumers. The receiver package is a thin shell around it.
package profiler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/cgroup"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/export"
	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/probe"
	"github.com/profinfer/profinfer/internal/registry"
	"github.com/profinfer/profinfer/internal/requests"
	"github.com/profinfer/profinfer/internal/ringread"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/timerslack"
	"github.com/profinfer/profinfer/internal/watch"
	"github.com/profinfer/profinfer/internal/window"
)

// Selector selects processes: by PID, or every process running Executable.
type Selector = registry.Selector

// NodeMode says when the node probes are attached.
type NodeMode int

const (
	NodesOff     NodeMode = iota // never: decode and graph probes only
	NodesSampled                 // in windows of Nodes.Graphs graphs, every Nodes.Interval
	NodesAll                     // always: every node of every graph
)

// Nodes decides which graphs are traced node by node.
type Nodes struct {
	Mode     NodeMode
	Interval time.Duration // NodesSampled: from the end of one window to the next
	Graphs   int           // NodesSampled: traced graphs per window
}

// Config is what the receiver's configuration decides.
type Config struct {
	Targets            []Selector // empty: every process that maps a GGML CPU backend
	DiscoveryInterval  time.Duration
	CollectionInterval time.Duration
	Nodes              Nodes
	NodeSpans          bool
	SampleEvery        int // spans for every Nth graph-bearing decode
	RingBufferSize     int
	Layers             probe.Layers
	Propagate          bool          // fail Start on the first target error
	TimerSlack         time.Duration // the process's threads' timer slack; 0: left alone
	Metrics            metadata.MetricsBuilderConfig
	Roofline           Roofline
	// Counters are read on every thread at node boundaries; those the machine lacks are
	// dropped at start with a warning.
	Counters []perfcount.Counter
}

// Roofline decides how nodes are classified: under Peaks, whose zero fields are
// measured at start for at most Probe, or kept from an earlier start in StateFile.
type Roofline struct {
	Enabled   bool
	Peaks     roofline.Peaks
	Probe     time.Duration
	StateFile string
}

// Profiler is one running profinfer.
type Profiler struct {
	cfg     Config
	set     receiver.Settings
	log     *zap.Logger
	traces  consumer.Traces
	metrics consumer.Metrics

	bpf      *probe.Loaded
	pool     *probe.Pool // the lasting probes, placed once per file
	tps      []link.Link // the tracepoint programs
	reader   *ringread.Reader
	reg      *registry.Registry
	counters *perfcount.Threads // nil: no perf counters
	watch    *watch.Watcher     // nil: the process hooks could not attach; discovery polls
	// cgroups reads targets' CPU quotas, made at the first metrics export; noCgroups
	// says it could not be. Used by the metrics goroutine alone.
	cgroups   *cgroup.Reader
	noCgroups bool

	mu          sync.Mutex // guards everything below, shared by the reader, the registry and the controller
	tracked     map[int]*tracked
	asm         *assemble.Assembler
	spans       *export.Spans
	acc         *export.Metrics
	pending     ptrace.Traces
	pendingFull bool   // pending holds maxPending spans or more
	seen        uint64 // decodes and loose graphs offered for spans, for span sampling
	traced      uint64 // graphs traced node by node
	tele        export.Telemetry
	asked       map[uint32]bool // threads whose counters the controller was asked to open
	retiring    []retiring      // processes gone, for the reader to drop once it drained the ring
	windows     *window.Scheduler
	reqs        *requests.Tracker
	ended       []*requests.Request       // scratch: requests just ended
	times       [events.TimesChunk]uint64 // scratch: a DeviceTimes record's times
	labels      map[string]string         // the device's op labels, interned (see label)
	effects     []effect                  // what the reader asks of the controller (control.go)
	wake        chan struct{}             // tells the controller that effects wait

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
	p := &Profiler{cfg: cfg, set: set, log: set.Logger, traces: traces, metrics: metrics,
		tracked: map[int]*tracked{}, pool: probe.NewPool(),
		asked: map[uint32]bool{}, labels: map[string]string{}, stop: make(chan struct{}), out: make(chan ptrace.Traces, exportQueue),
		wake: make(chan struct{}, 1)}
	p.exportCtx, p.cancelExport = context.WithCancel(context.Background())
	return p
}

// Start loads the eBPF programs, attaches to the targets present now and starts the
// background loops. Errors about single targets fail Start only when cfg.Propagate is set.
func (p *Profiler) Start(ctx context.Context) error {
	slackSet := p.setTimerSlack() // first: the start's own work wakes the runtime's monitor too
	reg, err := registry.New(registry.Config{Targets: p.cfg.Targets, Root: "/proc",
		Application: p.cfg.Layers.Application, Propagate: p.cfg.Propagate}, p, p.log)
	if err != nil {
		return err
	}
	p.reg = reg
	p.detectCounters()
	// The kernel's BTF, decoded once for every load here, and let go after them.
	types := btf.NewCache()
	if err := p.load(types); err != nil {
		return err
	}
	slackSet() // once profinfer has what it needs, not before a privilege error
	var real unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	roofs := p.roofs()
	ctr := export.NewCounters(p.cfg.Counters)
	p.spans = export.NewSpans(export.Clock{Offset: real.Nano() - int64(monotonic())}, p.cfg.NodeSpans, roofs.Peaks, ctr)
	p.spans.Resources = p.cfg.Metrics.ResourceAttributes
	p.acc = export.NewMetrics(p.cfg.Metrics, p.set, roofs, ctr)
	p.asm = assemble.New(sink{p})
	p.reqs = requests.New(uint64(requestIdle))
	p.windows = window.New(p.cfg.Nodes.Interval, time.Now)
	p.pending = ptrace.NewTraces()
	// The hooks go first, so that a process started during the first scan is noticed.
	p.watch, err = watch.Open(p.bpf.Traced, types)
	switch {
	case p.watch == nil:
		p.log.Warn("process hooks unavailable: new targets are found only by scanning /proc every discovery_interval",
			zap.Duration("discovery_interval", p.cfg.DiscoveryInterval), zap.Error(err))
	case err != nil:
		p.log.Warn("dynamic loader hook unavailable: a library loaded with dlopen is found by the scan of /proc every discovery_interval",
			zap.Duration("discovery_interval", p.cfg.DiscoveryInterval), zap.Error(err))
	}
	if err := p.reg.Scan(true); err != nil {
		p.close()
		return err
	}
	p.exported.Add(1)
	go p.exportLoop()
	p.wg.Add(4)
	go p.readLoop()
	if p.watch != nil {
		go func() {
			defer p.wg.Done()
			p.reg.Watch(p.watch, p.cfg.DiscoveryInterval)
		}()
	} else {
		go p.every(p.cfg.DiscoveryInterval, func() { _ = p.reg.Scan(false) })
	}
	go p.every(p.cfg.CollectionInterval, func() { p.emitMetrics(p.exportCtx) })
	go p.controlLoop()
	return nil
}

func (p *Profiler) load(types *btf.Cache) error {
	k, err := probe.ProbeKernel(types)
	if err != nil {
		return fmt.Errorf("profinfer: %w", err)
	}
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
	layers := probe.Layers{Scheduler: p.cfg.Layers.Scheduler, Counters: p.cfg.Layers.Counters}
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

// detectCounters keeps the configured perf counters this machine has, and says once
// which it lacks and why.
func (p *Profiler) detectCounters() {
	if len(p.cfg.Counters) == 0 {
		return
	}
	ok, missing := perfcount.Detect(p.cfg.Counters)
	if len(missing) > 0 {
		p.log.Warn("perf counters unavailable, continuing without them: "+strings.Join(missing, "; "),
			zap.Int("available", len(ok)))
	}
	p.cfg.Counters = ok
	p.cfg.Layers.Counters = len(ok) > 0 && p.cfg.Nodes.Mode != NodesOff
}

// roofs returns the roofline to classify nodes under, measuring what the configuration
// leaves unset, or taking it from the state file; zero when classification is off.
func (p *Profiler) roofs() roofline.Roofs {
	r := p.cfg.Roofline
	if !r.Enabled {
		return roofline.Roofs{}
	}
	roofs := roofline.Establish(roofline.EstablishConfig{Peaks: r.Peaks, Probe: r.Probe, StateFile: r.StateFile}, p.log)
	p.log.Info("roofline", zap.Float64("peak_flops", roofs.FLOPS), zap.Float64("peak_bandwidth", roofs.Bandwidth),
		zap.String("source", roofs.Source), zap.Time("at", roofs.At), zap.Int("trials", roofs.Trials),
		zap.Bool("provisional", roofs.Provisional), zap.String("fma", roofline.FMAKernel()))
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
	close(p.stop)
	// A pipeline that hangs (an exporter down, blocking) is cut off when ctx ends, or
	// after shutdownGrace: the collector's own shutdown context has no deadline.
	defer context.AfterFunc(ctx, p.cancelExport)()
	defer time.AfterFunc(shutdownGrace, p.cancelExport).Stop()
	if p.asm == nil { // Start failed or never ran
		p.close()
		return nil
	}
	if p.watch != nil {
		p.watch.Close()
		p.watch = nil
	}
	// The reader drains the ring buffer, then returns.
	if err := p.reader.Flush(); err != nil {
		p.reader.Close()
	}
	p.wg.Wait()
	p.mu.Lock()
	for _, t := range p.tracked { // decodes still waiting for a lookup
		t.looking = false
		p.release(t)
		p.endRequests(t, requests.Stopped)
	}
	p.mu.Unlock()
	p.flush(true)
	close(p.out)
	p.exported.Wait()
	p.emitMetrics(ctx)
	p.close()
	p.cancelExport()
	return nil
}

func (p *Profiler) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid, t := range p.tracked {
		t.attachment.Close()
		delete(p.tracked, pid)
	}
	p.pool.Close()
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

// ProbesAttached is the number of probes attached now.
func (p *Profiler) ProbesAttached() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probesLocked()
}

func (p *Profiler) probesLocked() int {
	n := 0
	for _, t := range p.tracked {
		n += t.attachment.Probes()
	}
	return n
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

func (p *Profiler) emitMetrics(ctx context.Context) {
	if p.metrics == nil || p.acc == nil {
		return
	}
	drops := p.drops()
	p.readQuotas()
	p.mu.Lock()
	p.tele.EventsDropped = drops
	p.tele.GraphsDropped = p.asm.Stats.DroppedGraphs
	p.tele.ProbesAttached = p.probesLocked()
	p.tele.GraphsTraced = p.traced
	p.tele.AttachFailures = p.reg.Failures()
	if p.cfg.Nodes.Mode == NodesSampled && p.cfg.Layers.Runtime {
		for pid := range p.tracked {
			// Zero (a window open) is long past: Window reads it as 0.
			p.acc.Window(pid, time.Until(p.windows.NextOf(pid)))
		}
	}
	md := p.acc.Emit(p.tele)
	p.mu.Unlock()
	if err := p.metrics.ConsumeMetrics(ctx, md); err != nil {
		p.log.Warn("metrics not accepted by the pipeline", zap.Error(err))
	}
}

// busy marks the collector's own work from now until done is called (assemble's Busy):
// the graphs that run meanwhile share their CPUs with it, and no verdict of starved uses
// them. Called without p.mu held.
func (p *Profiler) busy() (done func()) {
	p.mu.Lock()
	p.asm.Busy(monotonic())
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.asm.Idle(monotonic())
		p.mu.Unlock()
	}
}

// monotonic is CLOCK_MONOTONIC in nanoseconds, the clock of bpf_ktime_get_ns.
func monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
