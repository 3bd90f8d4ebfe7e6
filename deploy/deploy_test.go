// Package deploy holds the manifests and configs to run profinfer across a fleet; its
// test checks that they parse and say what the README says they say.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docs decodes every YAML document of file.
func docs(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, d)
	}
}

// at walks m along keys (map keys, or list indices as int).
func at(t *testing.T, m any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			mm, ok := m.(map[string]any)
			if !ok {
				t.Fatalf("no %q in %v", k, m)
			}
			m = mm[k]
		case int:
			l, ok := m.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("no [%d] in %v", k, m)
			}
			m = l[k]
		}
	}
	return m
}

func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// The capabilities granted, exactly: each is needed (README, deploy/kubernetes).
var caps = []string{"BPF", "PERFMON", "SYS_PTRACE", "SYS_NICE"}

func TestDaemonSet(t *testing.T) {
	d := docs(t, "kubernetes/daemonset.yaml")
	if len(d) != 1 || d[0]["kind"] != "DaemonSet" {
		t.Fatalf("want one DaemonSet, got %v", d)
	}
	spec := at(t, d[0], "spec", "template", "spec")
	if at(t, spec, "hostPID") != true {
		t.Error("hostPID is not set: profinfer would see only itself")
	}
	c := at(t, spec, "containers", 0)
	sc := at(t, c, "securityContext")
	if got := strs(at(t, sc, "capabilities", "add")); !slices.Equal(got, caps) {
		t.Errorf("capabilities %v, want exactly %v", got, caps)
	}
	if got := strs(at(t, sc, "capabilities", "drop")); !slices.Equal(got, []string{"ALL"}) {
		t.Errorf("capabilities dropped %v, want ALL", got)
	}
	if at(t, sc, "seccompProfile", "type") != "Unconfined" || at(t, sc, "allowPrivilegeEscalation") != false {
		t.Errorf("security context %v", sc)
	}
	for _, k := range []string{"requests", "limits"} {
		r := at(t, c, "resources", k).(map[string]any)
		if r["cpu"] == nil || r["memory"] == nil {
			t.Errorf("resources.%s %v lack cpu or memory", k, r)
		}
	}
	env := map[string]any{}
	for _, e := range at(t, c, "env").([]any) {
		env[at(t, e, "name").(string)] = e
	}
	if at(t, env["K8S_NODE_NAME"], "valueFrom", "fieldRef", "fieldPath") != "spec.nodeName" {
		t.Error("the node name is not passed for enrichment")
	}
	if at(t, env["GOMAXPROCS"], "value") != "1" {
		t.Error("the agent's Go runtime is not held to one P beside the model")
	}
	mounts := map[string]string{}
	for _, m := range at(t, c, "volumeMounts").([]any) {
		mounts[at(t, m, "name").(string)] = at(t, m, "mountPath").(string)
	}
	if mounts["state"] != "/var/lib/profinfer" || mounts["btf"] != "/sys/kernel/btf" {
		t.Errorf("mounts %v", mounts)
	}
}

// The Helm values give the chart's DaemonSet what the raw manifest has.
func TestHelmValues(t *testing.T) {
	v := docs(t, "helm/values.yaml")[0]
	d := docs(t, "kubernetes/daemonset.yaml")[0]
	c := at(t, d, "spec", "template", "spec", "containers", 0)
	if v["mode"] != "daemonset" || v["hostPID"] != true {
		t.Errorf("mode %v, hostPID %v", v["mode"], v["hostPID"])
	}
	if got := strs(at(t, v, "securityContext", "capabilities", "add")); !slices.Equal(got, caps) {
		t.Errorf("capabilities %v, want %v", got, caps)
	}
	if at(t, v, "securityContext", "seccompProfile", "type") != "Unconfined" {
		t.Error("seccomp profile not Unconfined")
	}
	for _, k := range []string{"requests", "limits"} {
		for _, r := range []string{"cpu", "memory"} {
			if at(t, v, "resources", k, r) != at(t, c, "resources", k, r) {
				t.Errorf("resources.%s.%s differ from the DaemonSet's", k, r)
			}
		}
	}
	extra := map[string]any{}
	for _, e := range at(t, v, "extraEnvs").([]any) {
		extra[at(t, e, "name").(string)] = e
	}
	if at(t, extra["GOMAXPROCS"], "value") != "1" {
		t.Error("the chart's agent is not held to one P as the DaemonSet's is")
	}
	if at(t, v, "alternateConfig", "service", "pipelines", "traces", "receivers", 0) != "profinfer" {
		t.Error("the chart's config does not run the profinfer receiver")
	}
	// The chart's agent is deploy/agent.yaml's: the same connectors and pipelines.
	agent := docs(t, "agent.yaml")[0]
	for _, path := range [][]any{{"connectors"}, {"service", "pipelines"}} {
		want, _ := json.Marshal(at(t, agent, path...))
		got, _ := json.Marshal(at(t, v, append([]any{"alternateConfig"}, path...)...))
		if string(got) != string(want) {
			t.Errorf("the chart's %v %s, deploy/agent.yaml's %s", path, got, want)
		}
	}
}

// The gateway's pods are associated by container.id, and its pipelines sample traces.
func TestGatewayConfig(t *testing.T) {
	g := docs(t, "gateway.yaml")[0]
	src := at(t, g, "processors", "k8s_attributes", "pod_association", 0, "sources", 0)
	if at(t, src, "from") != "resource_attribute" || at(t, src, "name") != "container.id" {
		t.Errorf("pod association %v, want by the container.id resource attribute", src)
	}
	if got := strs(at(t, g, "service", "pipelines", "traces", "processors")); !slices.Contains(got, "tail_sampling") || got[0] != "k8s_attributes" {
		t.Errorf("traces processors %v", got)
	}
	kinds := map[string]bool{}
	for _, d := range docs(t, "kubernetes/gateway.yaml") {
		kinds[d["kind"].(string)] = true
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"} {
		if !kinds[k] {
			t.Errorf("kubernetes/gateway.yaml has no %s", k)
		}
	}
}
