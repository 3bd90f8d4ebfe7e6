//go:build e2e

package receiver

// The fleet: a llama-server in a real container (podman, runc), the agent image run with
// exactly the DaemonSet's privileges, and an agent chained to a gateway over OTLP.

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"

	"github.com/profinfer/profinfer/internal/testbench"
)

// podman runs podman as this machine allows: with runc (crun refuses its hybrid cgroups)
// and without the default rlimits, which it may not raise.
type podman struct {
	bin, conf string
}

func requirePodman(t *testing.T) *podman {
	t.Helper()
	bin, err := exec.LookPath("podman")
	if err != nil {
		testbench.Missing(t, "podman")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		testbench.Missing(t, "runc")
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	err = os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return &podman{bin: bin, conf: conf}
}

func (p *podman) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	return cmd
}

// run runs podman with args and returns its trimmed output.
func (p *podman) run(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	cmd := p.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// logs returns what container id wrote to its stdout and stderr.
func (p *podman) logs(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	out, err := p.command(ctx, "logs", id).CombinedOutput()
	if err != nil {
		t.Fatalf("podman logs: %v: %s", err, out)
	}
	return string(out)
}

// serverImage imports an image whose root file system holds a static exe, as /bin's, and
// nothing else.
func (p *podman) serverImage(t *testing.T, ctx context.Context, exe string) string {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Fatalf("%s names a dynamic loader: the image holds no libraries", exe)
		}
	}
	root := t.TempDir()
	b, err := os.ReadFile(exe)
	if err == nil {
		err = os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(root, "bin", filepath.Base(exe)), b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(t.TempDir(), "rootfs.tar")
	if out, err := exec.CommandContext(ctx, "tar", "-C", root, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	image := "localhost/profinfer-test-server:" + strconv.Itoa(os.Getpid())
	p.run(t, ctx, "import", tarball, image)
	t.Cleanup(func() { _ = p.command(context.Background(), "rmi", "-f", image).Run() })
	return image
}

// containerIDs maps each process's PID to the container.id of its resource ("" for none),
// over spans and metrics.
func containerIDs(traces []ptrace.Traces, metrics []pmetric.Metrics) map[int64]string {
	ids := map[int64]string{}
	note := func(a map[string]any) {
		pid, _ := a["process.pid"].(int64)
		id, _ := a["container.id"].(string)
		if prev, ok := ids[pid]; ok && prev != id {
			ids[pid] = "inconsistent: " + prev + " and " + id
			return
		}
		ids[pid] = id
	}
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			note(td.ResourceSpans().At(i).Resource().Attributes().AsRaw())
		}
	}
	for _, md := range metrics {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			if _, ok := md.ResourceMetrics().At(i).Resource().Attributes().Get("process.pid"); ok {
				note(md.ResourceMetrics().At(i).Resource().Attributes().AsRaw())
			}
		}
	}
	return ids
}

func waitHTTP(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered", url)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// The test bench's static llama-server runs in a podman container, from an image built
// here from a root file system, while a llama-bench runs on the host. profinfer on the
// host names the container's spans and metrics with exactly the id podman gives it, and
// the host's process with none.
func TestE2EPodmanContainer(t *testing.T) {
	e := testbench.Require(t)
	pm := requirePodman(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	image := pm.serverImage(t, ctx, e.StaticServer())
	c := startCollectorOf(t, ctx, nil, "") // no targets: every GGML process
	port, err := testbench.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	id := pm.run(t, ctx, "run", "-d", "--network", "host", "-v", filepath.Dir(e.Model("llama-1b-q4_0"))+":/models:ro",
		image, "/bin/llama-server", "-m", "/models/llama-1b-q4_0.gguf", "-t", "2", "--host", "127.0.0.1",
		"--port", strconv.Itoa(port), "-c", "1024", "-np", "1")
	defer func() { _ = pm.command(context.Background(), "rm", "-f", id).Run() }()
	pid, _ := strconv.Atoi(pm.run(t, ctx, "inspect", "--format", "{{.State.Pid}}", id))
	inspected := pm.run(t, ctx, "inspect", "--format", "{{.Id}}", id)
	s := &testbench.Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	waitHTTP(t, ctx, s.URL+"/health")
	if _, err := s.Complete(ctx, "The quick brown fox", 8); err != nil {
		t.Fatal(err)
	}
	bench, err := testbench.Start(e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 8, 4, 2, 1)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	traces, metrics := c.stop(t)
	ids := containerIDs(traces, metrics)
	t.Logf("container.id by pid: %v; podman: pid %d, id %s", ids, pid, inspected)
	if got, ok := ids[int64(pid)]; !ok || got != inspected {
		t.Errorf("the container's llama-server (pid %d) has container.id %q, want podman's %q", pid, got, inspected)
	}
	if got, ok := ids[int64(bench.PID())]; !ok || got != "" {
		t.Errorf("the host's llama-bench (pid %d, seen %v) has container.id %q, want none", bench.PID(), ok, got)
	}
}

// daemonSetSecurity reads the capabilities and seccomp profile the DaemonSet grants.
func daemonSetSecurity(t *testing.T) (caps []string, seccomp string) {
	t.Helper()
	b, err := os.ReadFile("../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					HostPID    bool `yaml:"hostPID"`
					Containers []struct {
						SecurityContext struct {
							Capabilities   struct{ Add, Drop []string }
							SeccompProfile struct{ Type string } `yaml:"seccompProfile"`
						} `yaml:"securityContext"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &ds); err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || len(spec.Containers) != 1 {
		t.Fatalf("DaemonSet spec %+v", spec)
	}
	sc := spec.Containers[0].SecurityContext
	return sc.Capabilities.Add, sc.SeccompProfile.Type
}

// The image is multi-arch: deploy/Dockerfile built for linux/amd64 and linux/arm64 from
// make build-amd64 build-arm64 is one manifest list, and each platform's image holds the
// collector built for its machine.
func TestE2EMultiArchImage(t *testing.T) {
	pm := requirePodman(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for arch := range want {
		if _, err := os.Stat("../build/linux-" + arch + "/otelcol-profinfer"); err != nil {
			t.Fatalf("%v; run `make build-amd64 build-arm64`", err)
		}
	}
	list := "localhost/otelcol-profinfer-multi:" + strconv.Itoa(os.Getpid())
	ids := strings.Fields(pm.run(t, ctx, "build", "-q", "--platform", "linux/amd64,linux/arm64", "--manifest", list, "-f", "../deploy/Dockerfile", ".."))
	t.Cleanup(func() {
		_ = pm.command(context.Background(), "manifest", "rm", list).Run()
		_ = pm.command(context.Background(), append([]string{"rmi", "-f"}, ids...)...).Run()
	})
	var manifest struct {
		Manifests []struct {
			Digest   string
			Platform struct{ Architecture, OS string }
		}
	}
	if err := json.Unmarshal([]byte(pm.run(t, ctx, "manifest", "inspect", list)), &manifest); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range manifest.Manifests {
		arch := m.Platform.Architecture
		if m.Platform.OS != "linux" || want[arch] == 0 || seen[arch] {
			t.Errorf("manifest list entry for %s/%s", m.Platform.OS, arch)
			continue
		}
		seen[arch] = true
		ctr := pm.run(t, ctx, "create", "--platform", "linux/"+arch, list+"@"+m.Digest)
		exe := filepath.Join(t.TempDir(), "otelcol-profinfer")
		pm.run(t, ctx, "cp", ctr+":/otelcol-profinfer", exe)
		_ = pm.command(context.Background(), "rm", ctr).Run()
		f, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != want[arch] {
			t.Errorf("the %s image holds a collector for %v", arch, f.Machine)
		}
		f.Close()
	}
	if len(seen) != len(want) {
		t.Errorf("manifest list has %v, want amd64 and arm64", seen)
	}
}

// The agent image (deploy/Dockerfile, from the ocb output) runs in a container with the
// host's PID namespace, a read-only root and exactly the capabilities and seccomp
// profile of deploy/kubernetes/daemonset.yaml, and profiles a llama-bench on the host.
func TestE2EAgentImage(t *testing.T) {
	e := testbench.Require(t)
	pm := requirePodman(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root (podman's host PID namespace)")
	}
	image := "localhost/otelcol-profinfer-test:" + strconv.Itoa(os.Getpid())
	pm.run(t, ctx, "build", "-q", "-f", "../deploy/Dockerfile", "-t", image, "..")
	t.Cleanup(func() { _ = pm.command(context.Background(), "rmi", "-f", image).Run() })
	caps, seccomp := daemonSetSecurity(t)
	out := t.TempDir()
	state := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	cfg := `receivers:
  profinfer:
    roofline: {state_file: /var/lib/profinfer/roofline.json}
exporters:
  file: {path: /out/out.jsonl}
service:
  pipelines:
    traces: {receivers: [profinfer], exporters: [file]}
    metrics: {receivers: [profinfer], exporters: [file]}
`
	if err := os.WriteFile(filepath.Join(out, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// Its log is read from the file, not with podman logs: a podman process every 200 ms
	// would run beside the agent's roofline probe.
	agentLog := filepath.Join(state, "agent.log")
	args := []string{"run", "-d", "--pid", "host", "--read-only", "--cap-drop", "all", "--cap-add", strings.Join(caps, ","),
		"-v", out + ":/out", "-v", state + ":/var/lib/profinfer", "--log-driver", "k8s-file", "--log-opt", "path=" + agentLog}
	if seccomp == "Unconfined" {
		args = append(args, "--security-opt", "seccomp=unconfined")
	}
	id := pm.run(t, ctx, append(args, image, "--config", "/out/config.yaml")...)
	defer func() { _ = pm.command(context.Background(), "rm", "-f", id).Run() }()
	for i := 1; ; i++ {
		if b, _ := os.ReadFile(agentLog); strings.Contains(string(b), "Everything is ready") {
			break
		}
		if i%20 == 0 && pm.run(t, ctx, "inspect", "--format", "{{.State.Running}}", id) != "true" {
			t.Fatalf("the agent container stopped: %s", pm.logs(t, ctx, id))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := e.Bench(ctx, e.BenchArgs("llama-1b-q4_0", 8, 4, 2, 1)...); err != nil {
		t.Fatal(err)
	}
	// node-llama-cpp loads GGML with dlopen once its script runs, long after its exec:
	// only the hook on its dynamic loader, found through its own root (the agent's cannot
	// see the host's through PID 1's everywhere), tells the agent before the next scan.
	node, err := exec.LookPath("node")
	if err != nil {
		testbench.Missing(t, "node")
	}
	out2, err := testbench.Run(ctx, node, e.NodeArgs("llama-1b-q4_0", 8, 2, 1)...)
	if err != nil {
		t.Fatal(err)
	}
	nodeRun, err := testbench.ParseNode(out2)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	// The capabilities let it set its runtime's threads' slack, not only its own.
	agent, _ := strconv.Atoi(pm.run(t, ctx, "inspect", "--format", "{{.State.Pid}}", id))
	checkTimerSlack(t, agent)
	pm.run(t, ctx, "stop", "-t", "10", id)
	logs := pm.logs(t, ctx, id)
	if !strings.Contains(logs, "attached") {
		t.Fatalf("the agent never attached with capabilities %v:\n%s", caps, logs)
	}
	// Its roofs are its own start's, with nothing kept: whether the probe ran alone.
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "\troofline\t") {
			t.Logf("agent's %s", l)
		}
	}
	traces, _ := (&collector{out: filepath.Join(out, "out.jsonl"), roofsOnce: true}).read(t, false)
	decodes, nodeDecodes := 0, 0
	for _, s := range spans(traces) {
		if s.name == "llama_decode" {
			decodes++
			if s.pid == int64(nodeRun.PID) {
				nodeDecodes++
			}
		}
	}
	if decodes == 0 {
		t.Fatalf("no llama_decode span from the containerized agent:\n%s", logs)
	}
	if nodeDecodes == 0 {
		t.Errorf("no llama_decode span of node-llama-cpp (pid %d), which loads GGML with dlopen:\n%s", nodeRun.PID, logs)
	}
	t.Logf("agent in a container with %v, seccomp %s: %d decode spans, %d of node-llama-cpp", caps, seccomp, decodes, nodeDecodes)
}

// yamlConfig reads a collector config file from deploy/ as a generic tree.
func yamlConfig(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func sub(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

func writeYAML(t *testing.T, cfg map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// byTrace groups span IDs with their names and attributes by trace.
func byTrace(traces []ptrace.Traces) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, td := range traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			ss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				for k := 0; k < ss.At(j).Spans().Len(); k++ {
					s := ss.At(j).Spans().At(k)
					tr := s.TraceID().String()
					if out[tr] == nil {
						out[tr] = map[string]string{}
					}
					out[tr][s.SpanID().String()] = fmt.Sprintf("%s %d %d %v %d", s.Name(), s.StartTimestamp(), s.EndTimestamp(),
						s.Attributes().AsRaw(), s.Links().Len())
				}
			}
		}
	}
	return out
}

// The agent (deploy/agent.yaml) sends over OTLP on loopback to a gateway
// (deploy/gateway.yaml, its Kubernetes enrichment replaced by a static pod name, as no
// Kubernetes API exists here, and its exporters by a file). Every trace the gateway keeps
// is the agent's, span for span and attribute for attribute; its tail sampling keeps
// every request and every slow decode; resources arrive enriched; metrics arrive whole.
// Neither collector warns of a component named by a deprecated alias.
func TestE2EAgentToGateway(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	port, err := testbench.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	gw := yamlConfig(t, "gateway.yaml")
	sub(gw, "receivers", "otlp", "protocols", "grpc")["endpoint"] = fmt.Sprintf("127.0.0.1:%d", port)
	procs := sub(gw, "processors")
	delete(procs, "k8s_attributes")
	procs["resource/k8s"] = map[string]any{"attributes": []any{
		map[string]any{"key": "k8s.pod.name", "value": "llama-server-0", "action": "upsert"},
		map[string]any{"key": "k8s.namespace.name", "value": "inference", "action": "upsert"},
	}}
	sub(procs, "tail_sampling")["decision_wait"] = "2s"
	gwOut := filepath.Join(dir, "gateway.jsonl")
	gw["exporters"] = map[string]any{"file": map[string]any{"path": gwOut}}
	for _, p := range sub(gw, "service", "pipelines") {
		pl := p.(map[string]any)
		ps := pl["processors"].([]any)
		for i, name := range ps {
			if name == "k8s_attributes" {
				ps[i] = "resource/k8s"
			}
		}
		pl["exporters"] = []any{"file"}
	}
	quiet := map[string]any{"metrics": map[string]any{"level": "none"}} // two collectors, one :8888
	sub(gw, "service")["telemetry"] = quiet
	gateway := &collector{proc: runCollector(t, ctx, writeYAML(t, gw)), out: gwOut}

	ag := yamlConfig(t, "agent.yaml")
	sub(ag, "exporters", "otlp_grpc")["endpoint"] = fmt.Sprintf("127.0.0.1:%d", port)
	sub(ag, "receivers", "profinfer")["collection_interval"] = "1s" // metrics within the test's time
	agOut := filepath.Join(dir, "agent.jsonl")
	sub(ag, "exporters")["file"] = map[string]any{"path": agOut}
	for _, p := range sub(ag, "service", "pipelines") {
		pl := p.(map[string]any)
		pl["exporters"] = append(pl["exporters"].([]any), "file")
	}
	sub(ag, "service")["telemetry"] = quiet
	agent := &collector{proc: runCollector(t, ctx, writeYAML(t, ag)), out: agOut}

	s, err := e.StartServer(ctx, e.Bin("llama-server"), "llama-1b-q4_0", 2, "-np", "2")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for i := range 3 {
		if _, err := s.CompleteCached(ctx, fmt.Sprintf("Request %d: the quick brown fox", i), 12); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2500 * time.Millisecond) // the last request ends idle
	s.Stop()
	agentTraces, agentMetrics := agent.stop(t)
	time.Sleep(3 * time.Second) // tail sampling decides after decision_wait
	gateway.proc.Stop()
	gwTraces, gwMetrics := gateway.read(t, false)
	for name, c := range map[string]*collector{"agent": agent, "gateway": gateway} {
		for _, line := range strings.Split(c.proc.Stderr.String(), "\n") {
			if strings.Contains(line, "alias is deprecated") {
				t.Errorf("deploy/%s.yaml names a component by a deprecated alias: %s", name, line)
			}
		}
	}

	sent, kept := byTrace(agentTraces), byTrace(gwTraces)
	if len(kept) == 0 {
		t.Fatalf("the gateway kept no trace of the agent's %d:\n%s", len(sent), gateway.proc.Stderr.String())
	}
	for tr, spans := range kept {
		for id, s := range spans {
			if sent[tr][id] != s {
				t.Fatalf("trace %s span %s at the gateway:\n  %s\nthe agent sent:\n  %s", tr, id, s, sent[tr][id])
			}
		}
		if len(spans) != len(sent[tr]) {
			t.Fatalf("trace %s: %d spans at the gateway, %d sent", tr, len(spans), len(sent[tr]))
		}
	}
	// Every request, and every decode of 200 ms or more, is kept.
	requests, slow := 0, 0
	for _, sp := range spans(agentTraces) {
		slowDecode := sp.name == "llama_decode" && sp.end-sp.start >= 200e6
		if strings.HasPrefix(sp.name, "text_completion") || slowDecode {
			if strings.HasPrefix(sp.name, "text_completion") {
				requests++
			} else {
				slow++
			}
			found := false
			for _, tr := range kept {
				if _, ok := tr[sp.id]; ok {
					found = true
				}
			}
			if !found {
				t.Errorf("%s span %s (%d ms) not kept by the gateway", sp.name, sp.id, (sp.end-sp.start)/1e6)
			}
		}
	}
	if requests < 3 {
		t.Errorf("%d request spans from the agent, want 3", requests)
	}
	// Enriched resources: the static pod and the agent's detected host.
	for _, td := range gwTraces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			a := td.ResourceSpans().At(i).Resource().Attributes().AsRaw()
			if a["k8s.pod.name"] != "llama-server-0" || a["host.name"] == nil || a["process.pid"] == nil {
				t.Fatalf("resource at the gateway: %v", a)
			}
		}
	}
	// The gateway's latest count is one the agent sent (its last, at shutdown, may not
	// make it over the wire).
	counts := map[int64]bool{}
	eachMetric(agentMetrics, "llama.decode.tokens", func(m pmetric.Metric) {
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			counts[m.Sum().DataPoints().At(i).IntValue()] = true
		}
	})
	got, _ := lastSum(gwMetrics, "llama.decode.tokens")
	if got == 0 || !counts[got] {
		t.Errorf("llama.decode.tokens: the gateway has %d, the agent sent %v", got, counts)
	}
	t.Logf("the agent sent %d traces; the gateway kept %d (%d requests, %d slow decodes among them)", len(sent), len(kept), requests, slow)
}

// The distribution has every component the deploy/ configs name, and accepts them.
func TestE2EDeployConfigsValidate(t *testing.T) {
	bin, _ := filepath.Abs("../bin/otelcol-profinfer")
	if _, err := os.Stat(bin); err != nil {
		testbench.Missing(t, "bin/otelcol-profinfer; run `make build`")
	}
	for _, cfg := range []string{"agent.yaml", "gateway.yaml"} {
		out, err := exec.Command(bin, "validate", "--config", filepath.Join("../deploy", cfg)).CombinedOutput()
		if err != nil {
			t.Errorf("deploy/%s: %v\n%s", cfg, err, out)
		}
	}
}
