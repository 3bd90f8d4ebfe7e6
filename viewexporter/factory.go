// Package viewexporter is the profinferview exporter: it folds the spans and metrics of
// its pipelines into a per-process summary and serves it as a live web page, so that a
// collector shows where each token's time goes without Jaeger, Grafana or any other
// backend. On a gateway it shows every process of every host that sends it OTLP.
package viewexporter // import "github.com/profinfer/profinfer/viewexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

	"github.com/profinfer/profinfer/internal/shared"
	"github.com/profinfer/profinfer/viewexporter/internal/metadata"
)

// NewFactory returns the factory of the profinferview exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createTraces(_ context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	return getView(set, cfg.(*Config)), nil
}

func createMetrics(_ context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	return getView(set, cfg.(*Config)), nil
}

// views holds one view per *Config, so that the traces and metrics pipelines of one
// entry fill one page. An entry lives until its Shutdown.
var views shared.ByConfig[Config, *view]

func getView(set exporter.Settings, cfg *Config) *view {
	return views.Get(cfg, func(forget func()) *view { return newView(set, cfg, forget) })
}
