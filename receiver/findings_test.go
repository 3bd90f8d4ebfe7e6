//go:build e2e

package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/findingsconnector"
	"github.com/profinfer/profinfer/internal/report"
	"github.com/profinfer/profinfer/internal/schema"
)

// pipelineFindings is what the findings connector sent on, by process id and finding:
// the severity of its log records in the file, and whether Prometheus serves its point.
type pipelineFindings struct {
	logged map[int64]map[string]string
	served map[int64]map[string]bool
}

// findingsOut reads what the default config's pipelines carried of the findings: the
// log records the file exporter wrote to out, and the profinfer_finding series the
// Prometheus exporter on port prom serves. It polls until want says it has all it waits
// for, or a judging interval and more have passed.
func findingsOut(t *testing.T, ctx context.Context, out string, prom int, want func(pipelineFindings) bool) pipelineFindings {
	t.Helper()
	var got pipelineFindings
	deadline := time.Now().Add(25 * time.Second) // the connector judges every 10 s
	for {
		got = pipelineFindings{logged: loggedFindings(t, out), served: servedFindings(t, ctx, prom)}
		if want(got) || time.Now().After(deadline) || ctx.Err() != nil {
			return got
		}
		time.Sleep(time.Second)
	}
}

func loggedFindings(t *testing.T, out string) map[int64]map[string]string {
	t.Helper()
	got := findingLogs{}
	if err := readOutput(out, got); err != nil && !errors.Is(err, report.ErrCut) {
		t.Fatal(err)
	}
	return got
}

// findingLogs keeps the finding log records it is handed, by process: each finding's
// last severity.
type findingLogs map[int64]map[string]string

func (findingLogs) Traces(ptrace.Traces) error    { return nil }
func (findingLogs) Metrics(pmetric.Metrics) error { return nil }
func (got findingLogs) Logs(ld plog.Logs) error {
	for _, rl := range ld.ResourceLogs().All() {
		pid, _ := rl.Resource().Attributes().Get(schema.ResourceProcessPID)
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				if lr.EventName() != findingsconnector.EventFinding {
					continue
				}
				id, _ := lr.Attributes().Get(findingsconnector.AttrID)
				if got[pid.Int()] == nil {
					got[pid.Int()] = map[string]string{}
				}
				got[pid.Int()][id.Str()] = lr.SeverityText()
			}
		}
	}
	return nil
}

// findingSeries matches a profinfer_finding series of Prometheus's text format, its labels
// in any order.
var findingSeries = regexp.MustCompile(`(?m)^profinfer_finding\{([^}]*)\} 1$`)

func servedFindings(t *testing.T, ctx context.Context, prom int) map[int64]map[string]bool {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", prom), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	label := func(labels, name string) string {
		m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(labels)
		if m == nil {
			return ""
		}
		return m[1]
	}
	got := map[int64]map[string]bool{}
	for _, m := range findingSeries.FindAllStringSubmatch(string(body), -1) {
		pid, _ := strconv.ParseInt(label(m[1], "process_pid"), 10, 64)
		if got[pid] == nil {
			got[pid] = map[string]bool{}
		}
		got[pid][label(m[1], "profinfer_finding_id")] = true
	}
	return got
}
