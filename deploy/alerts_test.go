//go:build e2e

package deploy

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/profinfer/profinfer/findingsconnector"
	"github.com/profinfer/profinfer/internal/testbench"
)

// The alerts in prometheus/profinfer-alerts.yaml, run by promtool on recorded series of
// three hosts: a warning held five minutes alerts for its process, one that came and went
// does not, nor does an information finding; the same warning on three hosts alerts for
// the fleet after fifteen minutes. They select the series the findings connector emits,
// by its names.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testbench.Missing(t, "promtool (Debian's prometheus package)")
	}
	for _, args := range [][]string{{"check", "rules", "profinfer-alerts.yaml"}, {"test", "rules", "profinfer-alerts.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rules := docs(t, "prometheus/profinfer-alerts.yaml")[0]
	text := strings.Join(exprs(rules), "\n")
	for _, name := range []string{findingsconnector.MetricFinding, findingsconnector.AttrID, findingsconnector.AttrSeverity} {
		if prom := strings.ReplaceAll(name, ".", "_"); !strings.Contains(text, prom) {
			t.Errorf("no rule selects %s (%s)", prom, name)
		}
	}
}

// exprs are the expressions of every rule of a rules file.
func exprs(file map[string]any) []string {
	var out []string
	groups, _ := file["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if e, ok := r.(map[string]any)["expr"].(string); ok {
				out = append(out, e)
			}
		}
	}
	return out
}
