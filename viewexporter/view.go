package viewexporter // import "github.com/profinfer/profinfer/viewexporter"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/page"
	"github.com/profinfer/profinfer/internal/summary"
)

// view is the exporter both pipelines of one config share.
type view struct {
	cfg    *Config
	log    *zap.Logger
	forget func()

	mu  sync.Mutex // guards agg: pipelines consume while the server snapshots
	agg *summary.Aggregator

	sides *sides // the live comparison's, under a lock of their own (compare.go)

	startOnce, stopOnce sync.Once
	startErr, stopErr   error
	srv                 *http.Server
	done                chan struct{}
}

func newView(set exporter.Settings, cfg *Config, forget func()) *view {
	return &view{cfg: cfg, log: set.Logger, forget: forget, agg: summary.New(), sides: newSides()}
}

func (v *view) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// forgetAfter is how long the page keeps a process whose spans and metrics stopped
// coming, as they do once it exits (a live process sends metrics every collection
// interval): the page shows what ran in the last hour, not every llama-bench run of the
// day, and its memory stays at what an hour of processes takes (at most 64 of them).
const forgetAfter = time.Hour

func (v *view) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	v.mu.Lock()
	v.agg.Traces(td)
	v.agg.Expire(time.Now().Add(-forgetAfter))
	v.mu.Unlock()
	if err := v.sides.traces(td, v.sides.now().Add(-forgetAfter)); err != nil {
		v.log.Debug("profinferview: folding spans for comparing", zap.Error(err))
	}
	return nil
}

func (v *view) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	v.mu.Lock()
	v.agg.Metrics(md)
	v.agg.Expire(time.Now().Add(-forgetAfter))
	v.mu.Unlock()
	if err := v.sides.metrics(md, v.sides.now().Add(-forgetAfter)); err != nil {
		v.log.Debug("profinferview: folding metrics for comparing", zap.Error(err))
	}
	return nil
}

func (v *view) snapshot() *summary.View {
	v.mu.Lock()
	s := v.agg.Snapshot()
	v.mu.Unlock()
	advise.Annotate(s)
	return s
}

// Start serves the page; both pipelines call it, and it runs once.
func (v *view) Start(_ context.Context, _ component.Host) error {
	v.startOnce.Do(func() {
		ln, err := net.Listen("tcp", v.cfg.Endpoint)
		if err != nil {
			v.startErr = fmt.Errorf("profinferview: serving the page on %s: %w", v.cfg.Endpoint, err)
			return
		}
		v.srv = &http.Server{Handler: v.routes(), ReadHeaderTimeout: 10 * time.Second}
		v.done = make(chan struct{})
		go func() {
			defer close(v.done)
			if err := v.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				v.log.Error("profinferview: serving the page", zap.Error(err))
			}
		}()
		v.log.Info("profinfer view at http://" + ln.Addr().String() + "/")
	})
	return v.startErr
}

func (v *view) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.servePage)
	mux.HandleFunc("GET /api/view", v.serveView)
	v.sides.route(mux)
	return mux
}

func (v *view) servePage(w http.ResponseWriter, _ *http.Request) {
	var b bytes.Buffer
	if err := page.Write(&b, v.snapshot(), page.Live); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page inlines its script: nothing else may run, and nothing loads from elsewhere.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
	w.Write(b.Bytes())
}

func (v *view) serveView(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(v.snapshot()); err != nil {
		v.log.Debug("profinferview: writing the view", zap.Error(err))
	}
}

// Shutdown stops serving; both pipelines call it, and it runs once.
func (v *view) Shutdown(ctx context.Context) error {
	v.stopOnce.Do(func() {
		v.forget()
		if v.srv == nil {
			return
		}
		v.stopErr = v.srv.Shutdown(ctx)
		<-v.done
	})
	return v.stopErr
}
