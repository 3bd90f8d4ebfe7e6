package report

import (
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/summary"
)

// Summary feeds an aggregator from a read.
type Summary struct{ *summary.Aggregator }

// Traces folds a batch of spans in.
func (s Summary) Traces(td ptrace.Traces) error { s.Aggregator.Traces(td); return nil }

// Metrics folds a batch of metrics in.
func (s Summary) Metrics(md pmetric.Metrics) error { s.Aggregator.Metrics(md); return nil }
