package findingsconnector // import "github.com/profinfer/profinfer/findingsconnector"

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/findingsconnector/internal/metadata"
	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/summary"
)

// What a judge keeps: the processes of the last hour, as the page does; and it emits
// points only for those seen lately, so that an alert on a finding ends with its process.
const (
	forgetAfter = time.Hour
	staleAfter  = 5 * time.Minute
)

// kind is what a connector takes in.
type kind int

const (
	tracesIn kind = iota
	metricsIn
)

// out is where a connector sends the findings: one of the two is set.
type out struct {
	metrics consumer.Metrics
	logs    consumer.Logs
}

// judge folds what its connectors take in into one summary, and every interval judges
// it and sends the findings out.
type judge struct {
	cfg    *Config
	set    connector.Settings
	forget func()

	mu        sync.Mutex // guards what follows; the connectors consume while the ticker judges
	agg       *summary.Aggregator
	resources map[string]pcommon.Resource // each process's resource as it last came; never changed once kept
	inputs    []*input

	// said is, by process and finding, what its last log record said. The emitter alone
	// touches it: the ticker, then Shutdown once the ticker stopped.
	said map[string]string

	startOnce, stopOnce sync.Once
	started             atomic.Bool
	stop, done          chan struct{}
}

func newJudge(set connector.Settings, cfg *Config, forget func()) *judge {
	return &judge{cfg: cfg, set: set, forget: forget, agg: summary.New(), resources: map[string]pcommon.Resource{},
		said: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// input is one connector: what it takes in, and where it sends. The collector hands the
// same data to each connector of an input kind, so the first of each kind folds it.
type input struct {
	j     *judge
	kind  kind
	out   out
	folds bool
}

func (j *judge) input(k kind, o out) *input {
	j.mu.Lock()
	defer j.mu.Unlock()
	in := &input{j: j, kind: k, out: o, folds: true}
	for _, other := range j.inputs {
		if other.kind == k {
			in.folds = false
		}
	}
	j.inputs = append(j.inputs, in)
	return in
}

func (in *input) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (in *input) Start(context.Context, component.Host) error {
	in.j.startOnce.Do(func() {
		in.j.started.Store(true)
		go in.j.run()
	})
	return nil
}

func (in *input) Shutdown(ctx context.Context) error {
	j := in.j
	var err error
	j.stopOnce.Do(func() {
		j.forget()
		// No last word: the exporters downstream may be shut down already (one shared by
		// several pipelines stops at its first pipeline's shutdown).
		if j.started.Load() {
			close(j.stop)
			select {
			case <-j.done:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	})
	return err
}

func (in *input) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	if !in.folds {
		return nil
	}
	j := in.j
	j.mu.Lock()
	defer j.mu.Unlock()
	j.agg.Traces(td)
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		j.keep(td.ResourceSpans().At(i).Resource())
	}
	return nil
}

func (in *input) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	if !in.folds {
		return nil
	}
	j := in.j
	j.mu.Lock()
	defer j.mu.Unlock()
	j.agg.Metrics(md)
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		j.keep(md.ResourceMetrics().At(i).Resource())
	}
	return nil
}

// resolved returns, by id, the severity of process id's findings that it had at the
// last judging (was) and has no more (is): their points go to 0 once, so that an alert on
// one ends with its cause.
func resolved(id string, was, is map[string]string) map[string]string {
	var gone map[string]string
	for key, text := range was {
		finding, ok := strings.CutPrefix(key, id+"\x00")
		if _, still := is[key]; !ok || still {
			continue
		}
		if gone == nil {
			gone = map[string]string{}
		}
		gone[finding], _, _ = strings.Cut(text, "\x00")
	}
	return gone
}

// keep keeps a process's resource for its findings: a copy, made anew only when it
// changed (the model named once its file was read).
func (j *judge) keep(res pcommon.Resource) {
	id, pid := summary.ProcessID(res.Attributes())
	if pid == "" {
		return // the collector's own telemetry
	}
	if old, ok := j.resources[id]; ok && old.Attributes().Equal(res.Attributes()) {
		return
	}
	r := pcommon.NewResource()
	res.CopyTo(r)
	j.resources[id] = r
}

// run judges every interval until Shutdown.
func (j *judge) run() {
	defer close(j.done)
	t := time.NewTicker(j.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
			if err := j.emit(context.Background()); err != nil {
				j.set.Logger.Warn("findings not accepted by the pipeline", zap.Error(err))
			}
		}
	}
}

// emit judges the summary and sends the findings to the outputs: those of the
// connectors that take metrics in where there are some (every rule needs the metrics),
// else those that take traces in.
func (j *judge) emit(ctx context.Context) error {
	now := time.Now()
	j.mu.Lock()
	j.agg.Expire(now.Add(-forgetAfter))
	v := j.agg.Snapshot()
	resources := make(map[string]pcommon.Resource, len(v.Processes))
	for _, p := range v.Processes {
		if r, ok := j.resources[p.ID]; ok {
			resources[p.ID] = r
		}
	}
	j.resources = resources // those the summary forgot go with it
	var metricsOut []consumer.Metrics
	var logsOut []consumer.Logs
	for _, k := range []kind{metricsIn, tracesIn} {
		for _, in := range j.inputs {
			if in.kind != k {
				continue
			}
			if in.out.metrics != nil {
				metricsOut = append(metricsOut, in.out.metrics)
			}
			if in.out.logs != nil {
				logsOut = append(logsOut, in.out.logs)
			}
		}
		if len(metricsOut)+len(logsOut) > 0 {
			break
		}
	}
	j.mu.Unlock()

	advise.Annotate(v)
	// The emitter alone builds: a builder a judgement, the interval's seconds apart.
	mb, ld := metadata.NewMetricsBuilder(j.cfg.MetricsBuilderConfig, j.set), plog.NewLogs()
	ts := pcommon.NewTimestampFromTime(now)
	said := make(map[string]string, len(j.said))
	for _, p := range v.Processes {
		res, ok := resources[p.ID]
		if !ok {
			continue
		}
		records(ld, res, p, j.said, said, ts) // what was said, kept with the event off too: the gone points need it
		if now.Sub(p.LastSeen) < staleAfter {
			points(mb, res, p.Findings, resolved(p.ID, j.said, said), ts)
		}
	}
	j.said = said
	md := mb.Emit()

	var errs []error
	if md.MetricCount() > 0 {
		for _, m := range metricsOut {
			errs = append(errs, m.ConsumeMetrics(ctx, md))
		}
	}
	if ld.LogRecordCount() > 0 && j.cfg.Events.ProfinferFinding.Enabled {
		for _, l := range logsOut {
			errs = append(errs, l.ConsumeLogs(ctx, ld))
		}
	}
	return errors.Join(errs...)
}
