// Package findingsconnector is the profinferfindings connector: it folds the spans and
// metrics of its pipelines into a per-process summary, as the page and the report do,
// judges them with profinfer's rules, and sends the findings on as telemetry, so that a
// fleet alerts on them where it alerts on anything else: a profinfer.finding point for
// each finding a process has, its estimated gain, and a log record when a finding
// appears or changes, each on the process's own resource.
package findingsconnector // import "github.com/profinfer/profinfer/findingsconnector"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/profinfer/profinfer/findingsconnector/internal/metadata"
	"github.com/profinfer/profinfer/internal/shared"
)

// NewFactory returns the factory of the profinferfindings connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		connector.WithTracesToMetrics(tracesToMetrics, metadata.TracesToMetricsStability),
		connector.WithTracesToLogs(tracesToLogs, metadata.TracesToLogsStability),
		connector.WithMetricsToMetrics(metricsToMetrics, metadata.MetricsToMetricsStability),
		connector.WithMetricsToLogs(metricsToLogs, metadata.MetricsToLogsStability),
	)
}

// The collector makes one connector per pair of pipeline types; those of one entry
// share a judge, which each feeds with its input and hands its output.

func tracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	j := getJudge(set, cfg.(*Config))
	return j.input(tracesIn, out{metrics: next}), nil
}

func tracesToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Traces, error) {
	j := getJudge(set, cfg.(*Config))
	return j.input(tracesIn, out{logs: next}), nil
}

func metricsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Metrics, error) {
	j := getJudge(set, cfg.(*Config))
	return j.input(metricsIn, out{metrics: next}), nil
}

func metricsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Metrics, error) {
	j := getJudge(set, cfg.(*Config))
	return j.input(metricsIn, out{logs: next}), nil
}

// judges holds one judge per *Config. An entry lives until its Shutdown.
var judges shared.ByConfig[Config, *judge]

func getJudge(set connector.Settings, cfg *Config) *judge {
	return judges.Get(cfg, func(forget func()) *judge { return newJudge(set, cfg, forget) })
}
