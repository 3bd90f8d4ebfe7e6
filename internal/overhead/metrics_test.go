package overhead

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Two exports of the file exporter: a periodic one, then the one at shutdown with two
// resources (two probed processes), one of them with two data points.
const metricsJSON = `{"resourceMetrics":[{"resource":{},"scopeMetrics":[{"metrics":[
 {"name":"profinfer.events.received","sum":{"dataPoints":[{"asInt":"10"}],"aggregationTemporality":2,"isMonotonic":true}},
 {"name":"profinfer.events.dropped","sum":{"dataPoints":[{"asInt":"1"}],"aggregationTemporality":2,"isMonotonic":true}}]}]}]}

{"resourceMetrics":[
 {"resource":{"attributes":[{"key":"process.pid","value":{"intValue":"1"}}]},"scopeMetrics":[{"metrics":[
  {"name":"profinfer.events.received","sum":{"dataPoints":[{"asInt":"100"},{"asInt":"20"}],"aggregationTemporality":2,"isMonotonic":true}},
  {"name":"profinfer.probes.attached","gauge":{"dataPoints":[{"asInt":"6"}]}}]}]},
 {"resource":{"attributes":[{"key":"process.pid","value":{"intValue":"2"}}]},"scopeMetrics":[{"metrics":[
  {"name":"profinfer.events.received","sum":{"dataPoints":[{"asInt":"3"}],"aggregationTemporality":2,"isMonotonic":true}}]}]}]}
`

func TestLastSums(t *testing.T) {
	// The JSON above spans several lines for reading; the exporter writes a batch a line.
	var lines []string
	for _, batch := range strings.Split(metricsJSON, "\n\n") {
		lines = append(lines, strings.ReplaceAll(batch, "\n", ""))
	}
	got, err := LastSums(strings.NewReader(strings.Join(lines, "\n")),
		"profinfer.events.received", "profinfer.events.dropped", "profinfer.probes.attached", "absent")
	if err != nil {
		t.Fatal(err)
	}
	// dropped is only in the first batch; attached is a gauge, not a sum.
	want := map[string]int64{"profinfer.events.received": 123, "profinfer.events.dropped": 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("LastSums (-want +got):\n%s", d)
	}
}

func TestLastSumsBadLine(t *testing.T) {
	if _, err := LastSums(strings.NewReader("{}\nnot json\n")); err == nil {
		t.Error("LastSums accepted a line that is not JSON")
	}
}
