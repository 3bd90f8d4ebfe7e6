//go:build e2e

package receiver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/testbench"
	"github.com/profinfer/profinfer/internal/vm"
)

// degradations are the warnings each kernel of the matrix must print at start, once,
// and no other kernel may: what it lacks, found by probing its features.
var degradations = map[string][]string{
	"5.10": {"no bpf_loop (Linux 5.17)", "no socket tracepoints (Linux 6.5)", "no uprobe_multi links (Linux 6.6)"},
	"6.1":  {"no socket tracepoints (Linux 6.5)", "no uprobe_multi links (Linux 6.6)"},
	"6.12": nil,
}

// everyDegradation is every warning of degradations, to check that a kernel prints none
// but its own.
func everyDegradation() []string {
	seen := map[string]bool{}
	var all []string
	for _, ws := range degradations {
		for _, w := range ws {
			if !seen[w] {
				seen[w] = true
				all = append(all, w)
			}
		}
	}
	return all
}

// guestArch is one machine of the kernel matrix and what its guests run.
type guestArch struct {
	arch      string
	kernels   []string // the series it must have
	collector string   // the distribution built for it
	portable  func(e *testbench.Env, tool string) string
	moe       bool // also full tracing of the tiny MoE model
	// counters are full tracing's: task-clock everywhere, and on arm64 the ARM PMU set,
	// as far as qemu's emulated PMU has it.
	counters []string
	fma      string // the roofline probe's FMA loop on qemu's CPU, which has AVX2, and SVE of 512 bits
}

var guestArches = []guestArch{
	{"amd64", []string{"5.10", "6.1", "6.12"}, "../bin/otelcol-profinfer", (*testbench.Env).Portable, false,
		[]string{"task-clock"}, "avx2"},
	{"arm64", []string{"6.1", "6.12"}, "../build/linux-arm64/otelcol-profinfer", (*testbench.Env).PortableARM64, true,
		[]string{"task-clock", "cycles", "instructions", "ll_cache_miss_rd", "stall_backend"}, "sve-512"},
}

// The kernel matrix: Debian's x86-64 5.10, 6.1 and 6.12, and its arm64 6.1 and 6.12,
// booted under qemu, each running the real collector built for its machine against a real
// (portable, static) llama.cpp built for it. In each kernel: the eBPF verifier test, the
// thread-name record's (TestE2EThreadName) and the connections' (TestE2EConnections), then the default configuration
// (config/otelcol.yaml, unedited) and full tracing with the scheduler layer, a metrics export every 2 s and a
// software counter, each one collector following llama-bench, then llama-server serving a
// request, and on arm64 full tracing also the MoE model. Each workload must yield decodes,
// graphs, node spans, the request and metrics (and MoE routing), told apart by its pid;
// each collector must log no error, exactly the kernel's degradation warnings, and count
// what it exported. Guests run three at a time (go test's -parallel, 3 in
// scripts/test.sh).
func TestE2EKernels(t *testing.T) {
	defaultCfg, err := os.ReadFile("../config/otelcol.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(defaultCfg), "  profinfer:\n") {
		t.Fatal("config/otelcol.yaml has no profinfer receiver to set up full tracing in")
	}
	for _, a := range guestArches {
		full := strings.Replace(string(defaultCfg), "  profinfer:\n", fmt.Sprintf(
			"  profinfer: {nodes: {mode: all}, layers: {scheduler: true}, counters: [%s], collection_interval: 2s}\n", strings.Join(a.counters, ", ")), 1)
		env, kernels := vm.Require(t, a.arch)
		for _, name := range a.kernels {
			if !slices.ContainsFunc(kernels, func(k vm.Kernel) bool { return k.Name == name }) {
				t.Fatalf("%s kernel %s missing; run `make testenv`", a.arch, name)
			}
		}
		bin, _ := filepath.Abs(a.collector)
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v; run `make build build-arm64`", bin, err)
		}
		for _, p := range []string{a.portable(env, "llama-bench"), a.portable(env, "llama-server")} {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("%v; run `make testenv`", err)
			}
		}
		// The verifier test, as a static binary for the guests.
		verifier := filepath.Join(t.TempDir(), "probe.test")
		build := exec.Command("go", "test", "-c", "-tags", "e2e", "-o", verifier, "../internal/probe")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+a.arch)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the %s verifier test: %v\n%s", a.arch, err, out)
		}
		for _, k := range kernels {
			name := k.Name
			if a.arch != "amd64" {
				name = a.arch + "/" + k.Name
			}
			t.Run(name, func(t *testing.T) {
				// Each guest's vCPUs run on one host thread (tcg,thread=single), and idle
				// in its sleeps and waits: three guests at once keep two cores busy (the
				// matrix 3.5 minutes, against 5 two at a time), where five slowed each
				// until node spans missed parts of graphs. A guest runs only its own
				// processes.
				t.Parallel()
				files := &vm.Initramfs{}
				guestFiles := map[string]string{
					"/usr/bin/otelcol-profinfer": bin,
					"/usr/bin/probe.test":        verifier,
					"/usr/bin/llama-bench":       a.portable(env, "llama-bench"),
					"/usr/bin/llama-server":      a.portable(env, "llama-server"),
					"/models/tiny-dense.gguf":    env.Model("tiny-dense"),
				}
				if a.moe {
					guestFiles["/models/tiny-moe.gguf"] = env.Model("tiny-moe")
				}
				for guest, host := range guestFiles {
					if err := files.File(guest, host, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				files.Bytes("/cfg/default.yaml", defaultCfg, 0o644)
				files.Bytes("/cfg/full.yaml", []byte(full), 0o644)
				files.Dir("/var/lib/profinfer", 0o755)
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
				defer cancel()
				g := &vm.Guest{Kernel: k, Files: files, Script: guestScript}
				r, err := g.Run(ctx, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("Linux %s: init at %v, %v in all", k.Release, r.InitAt, r.Wall.Round(time.Second))
				if r.Status != 0 {
					t.Fatalf("guest script exited %d:\n%s", r.Status, r.Output)
				}
				verifierOut, _ := os.ReadFile(filepath.Join(r.Out, "verifier.txt"))
				if !strings.Contains(string(verifierOut), "\nPASS") || !strings.Contains(string(verifierOut), "--- PASS: TestE2EThreadName") ||
					!strings.Contains(string(verifierOut), "--- PASS: TestE2EConnections") {
					t.Errorf("verifier test on Linux %s:\n%s", k.Release, verifierOut)
				} else if m := regexp.MustCompile(`Linux [^:]*: .*`).Find(verifierOut); m != nil {
					t.Logf("%s", m)
				}
				checkGuestRoofline(t, filepath.Join(r.Out, "default", "collector.log"), a.fma)
				for _, cfg := range []string{"default", "full"} {
					workloads := []string{"llama-bench", "llama-server"}
					if cfg == "full" && a.moe {
						workloads = append(workloads, "llama-bench-moe")
					}
					t.Run(cfg, func(t *testing.T) {
						log, traces, metrics := checkGuestCollector(t, k, filepath.Join(r.Out, cfg))
						for _, w := range workloads {
							t.Run(w, func(t *testing.T) {
								exe := strings.TrimSuffix(w, "-moe")
								traces, metrics := checkGuestRun(t, log, traces, metrics, filepath.Join(r.Out, cfg+"-"+w), cfg, exe, a.counters)
								if w != exe {
									layers, used, experts := modelShape(t, env.Model("tiny-moe"))
									checkMoE(t, traces, metrics, layers, used, experts)
								}
							})
						}
					})
				}
			})
		}
	}
}

// checkGuestCounters checks that each counter full tracing asked for either is on node
// spans or was reported unavailable at start with its reason, and says which were which:
// the hardware ones are as the emulated CPU's PMU has them.
func checkGuestCounters(t *testing.T, log string, traces []ptrace.Traces, counters []string) {
	var warning string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "perf counters unavailable") {
			warning = line
		}
	}
	on := map[string]bool{}
	sums := map[string]int64{}
	for _, s := range spans(traces) {
		for _, c := range counters {
			if v, ok := s.attrs["perf."+strings.ReplaceAll(c, "-", "_")].(int64); ok && s.name == "MUL_MAT" {
				on[c] = true
				sums[c] += v
			}
		}
	}
	var counted, unavailable []string
	for _, c := range counters {
		missing := strings.Contains(warning, c+" (")
		switch {
		case on[c] && missing:
			t.Errorf("counter %s is on node spans but was reported unavailable: %s", c, warning)
		case on[c]:
			counted = append(counted, c)
		case missing:
			unavailable = append(unavailable, c)
			// Where cycles count, the PMU is there: it lacks this one event.
			if on["cycles"] && c != "task-clock" && !strings.Contains(warning, c+" (this machine's PMU does not count this event") {
				t.Errorf("counter %s unavailable for a reason other than its event: %s", c, warning)
			}
		default:
			t.Errorf("counter %s is neither on node spans nor reported unavailable", c)
		}
	}
	t.Logf("counters on node spans: %v, summed over MUL_MAT spans %v; unavailable: %v (%s)", counted, sums, unavailable, warning)
	// task-clock counts everywhere, and cycles wherever there is a PMU (qemu emulates
	// arm64's cycle counter).
	for _, c := range []string{"task-clock", "cycles"} {
		if on[c] && sums[c] <= 0 || c == "task-clock" && !on[c] {
			t.Errorf("%s on MUL_MAT spans sums to %d", c, sums[c])
		}
	}
}

// checkGuestRoofline checks that the collector measured the guest CPU's roofline with the
// FMA loop for its widest vectors: under emulation far below a real core, but measured.
func checkGuestRoofline(t *testing.T, logPath, fma string) {
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"peak_flops": ([0-9.e+]+),.* "peak_bandwidth": ([0-9.e+]+).*"fma": "([a-z0-9-]+)"`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("no roofline measured:\n%s", log)
	}
	flops, _ := strconv.ParseFloat(string(m[1]), 64)
	bw, _ := strconv.ParseFloat(string(m[2]), 64)
	t.Logf("roofline under emulation: %.2f GFLOP/s (%s), %.2f GB/s", flops/1e9, m[3], bw/1e9)
	if flops < 1e7 || bw < 1e7 || string(m[3]) != fma {
		t.Errorf("roofline peaks %g FLOP/s with %s, %g B/s; want %s", flops, m[3], bw, fma)
	}
}

// checkGuestCollector checks one collector's run in a guest, in dir: no error logged,
// exactly the kernel's degradation warnings, and its counts against what it exported,
// which it returns with its log.
func checkGuestCollector(t *testing.T, k vm.Kernel, dir string) (string, []ptrace.Traces, []pmetric.Metrics) {
	logText, err := os.ReadFile(filepath.Join(dir, "collector.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(logText)
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "\terror\t") || strings.Contains(line, "\tpanic\t") || strings.HasPrefix(line, "Error:") {
			t.Errorf("error logged: %s", line)
		}
	}
	for _, w := range everyDegradation() {
		want := 0
		for _, own := range degradations[k.Name] {
			if own == w {
				want = 1
			}
		}
		if got := strings.Count(log, w); got != want {
			t.Errorf("warning %q printed %d times on Linux %s, want %d", w, got, k.Release, want)
		}
	}
	if strings.Contains(log, "process hooks unavailable") {
		t.Errorf("the process hooks did not load on Linux %s", k.Release)
	}
	if t.Failed() {
		t.Fatalf("collector log:\n%s", log)
	}
	traces, metrics := (&collector{out: filepath.Join(dir, "profinfer-output.pb"), roofsOnce: true}).read(t, false)
	checkCounts(t, traces, metrics)
	return log, traces, metrics
}

// checkGuestRun checks what a guest's collector, under configuration cfg, exported of one
// workload against exe, whose pid is in dir, and returns it. Full tracing asked for
// counters.
func checkGuestRun(t *testing.T, log string, traces []ptrace.Traces, metrics []pmetric.Metrics, dir, cfg, exe string, counters []string) ([]ptrace.Traces, []pmetric.Metrics) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	if !strings.Contains(log, fmt.Sprintf(`"pid": %d, "exe": "/usr/bin/%s"`, pid, exe)) {
		t.Fatalf("%s (pid %d) was not attached to; collector log:\n%s", exe, pid, log)
	}
	traces, metrics = ofPID(traces, metrics, pid)
	if exe == "llama-bench" {
		// Held in its --delay, before any decode: every graph is whole, under its decode.
		checkGraphs(t, traces, 0)
		// It exits before the collector stops: the hook told how.
		if !slices.ContainsFunc(spans(traces), func(s span) bool {
			return s.pid == int64(pid) && s.name == schema.SpanProcess && len(s.eventAttrs) == 1 && s.eventAttrs[0][schema.ProcessExitCode] == int64(0)
		}) {
			t.Errorf("no %s span with exit status 0 for llama-bench (pid %d)", schema.SpanProcess, pid)
		}
	}
	decodes, mulmats, requests, counted, graphs := 0, 0, 0, 0, 0
	var onCPU int64
	var seen []string // every request span, for the message if ours is missing
	for _, s := range spans(traces) {
		if strings.HasPrefix(s.name, "text_completion") {
			seen = append(seen, fmt.Sprintf("%d prompt + %d cached tokens, %d out in %d decodes, ended %v",
				s.attrs["llama.request.prompt_tokens"], s.attrs["gen_ai.usage.cache_read.input_tokens"],
				s.attrs["gen_ai.usage.output_tokens"], s.attrs["llama.request.decodes"], s.attrs["llama.request.end"]))
		}
		switch {
		case s.name == "llama_decode":
			decodes++
		case s.name == "ggml.graph_compute" && s.attrs["ggml.graph.traced"] == true:
			// The graph probes walk the process's threads for their CPU time, which the
			// kernel brings up to date at its ticks (4 ms at Debian's 250 Hz) and switches:
			// a shorter graph may read none, one of two ticks or more may not.
			graphs++
			run, _ := s.attrs["ggml.graph.on_cpu_ns"].(int64)
			onCPU += run
			if run <= 0 && s.end-s.start >= 8_000_000 {
				t.Errorf("a traced graph span of %d ms without its threads' CPU time: %v", (s.end-s.start)/1e6, s.attrs)
			}
		case s.name == "MUL_MAT":
			mulmats++
			if _, ok := s.attrs["perf.task_clock"]; ok {
				counted++
			}
		// Ours generates 8 tokens; llama-server may decode one as it starts.
		case strings.HasPrefix(s.name, "text_completion") && s.attrs["gen_ai.usage.output_tokens"] == int64(8):
			requests++
			// Its arrival, from the socket syscalls: the syscall numbers are the machine's.
			if w, ok := s.attrs[schema.LlamaRequestWait].(float64); !ok || w < 0 || w > 5 {
				t.Errorf("the request's wait %v, want its arrival seen, a moment before its first decode", s.attrs[schema.LlamaRequestWait])
			}
		}
	}
	if decodes < 2 || mulmats == 0 || graphs == 0 || onCPU <= 0 {
		t.Errorf("%d llama_decode, %d traced graph (their threads on a CPU %d ns) and %d MUL_MAT spans, want a prefill and decodes, traced graphs with CPU time and matmuls",
			decodes, graphs, onCPU, mulmats)
	}
	if exe == "llama-server" {
		t.Logf("request spans: %q", seen)
	}
	if want := map[string]int{"llama-bench": 0, "llama-server": 1}[exe]; requests != want {
		server, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		t.Errorf("%d request spans of 8 output tokens, want %d; request spans: %q\nserver log:\n%s", requests, want, seen, server)
	}
	// Full tracing reads task-clock at every node of a thread whose counters are open:
	// they are opened as each thread is first seen, so a server's first request may come
	// before.
	t.Logf("%d of %d MUL_MAT spans carry perf.task_clock", counted, mulmats)
	if full := cfg == "full"; full != (counted > 0) && (exe == "llama-bench" || !full) {
		t.Errorf("%d of %d MUL_MAT spans carry perf.task_clock", counted, mulmats)
	}
	if cfg == "full" && exe == "llama-bench" {
		checkGuestCounters(t, log, traces, counters)
	}
	if cfg == "default" && exe == "llama-server" {
		// The server ran in a cgroup v2 allowed 2 CPUs.
		var limit float64
		var path string
		eachMetric(metrics, "profinfer.cgroup.cpu.limit", func(m pmetric.Metric) {
			dp := m.Gauge().DataPoints().At(0)
			limit = dp.DoubleValue()
			v, _ := dp.Attributes().Get("profinfer.cgroup.path")
			path = v.Str()
		})
		if limit != 2 || path != "/profinfer" {
			t.Errorf("profinfer.cgroup.cpu.limit %v of cgroup %q, want 2 of /profinfer", limit, path)
		}
	}
	if n, ok := lastSum(metrics, "llama.decode.tokens"); !ok || n == 0 {
		t.Errorf("llama.decode.tokens = %d (exported: %v)", n, ok)
	}
	return traces, metrics
}

// guestScript runs in each kernel. The portable llama.cpp processes are held (SIGSTOP)
// once started, until the collector has attached to them: under emulation an attach
// takes seconds, and the tiny model's work less. llama-bench sleeps (--delay) before its
// first decode, so none is cut by the hold; llama-server may be held mid-way through a
// decode it makes as it starts, even without its warm-up, which the checks allow.
const guestScript = `
set -u
/usr/bin/probe.test -test.run 'TestE2EVerifier|TestE2EThreadName|TestE2EConnections' -test.v >/out/verifier.txt 2>&1
echo "verifier test exited $?"

# A cgroup v2 with a CPU quota of 2 CPUs, which does not slow the server it holds.
mount -t cgroup2 none /sys/fs/cgroup && echo +cpu >/sys/fs/cgroup/cgroup.subtree_control &&
	mkdir /sys/fs/cgroup/profinfer && echo "200000 100000" >/sys/fs/cgroup/profinfer/cpu.max ||
	echo "no cgroup v2 with the cpu controller"

# until SECONDS COMMAND...: runs COMMAND every half second until it succeeds.
until_ok() {
	n=$(( $1 * 2 )); shift
	while ! "$@" >/dev/null 2>&1; do
		n=$((n - 1)); [ $n -gt 0 ] || { echo "timed out: $*"; return 1; }
		sleep 0.5
	done
}
# stop PID NAME LOG: SIGTERM, and where the process has not ended 60 s later, what it was
# doing (its log's end, its threads' kernel waits) before SIGKILL: a hang fails the run
# saying where, not at the test's timeout.
alive() { s=$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null) && [ "$s" != Z ]; }
stop() {
	kill $1
	n=120
	while alive $1 && [ $n -gt 0 ]; do n=$((n - 1)); sleep 0.5; done
	if alive $1; then
		echo "$2 had not ended 60 s after SIGTERM; its log's end:"
		tail -30 $3
		for t in /proc/$1/task/*; do echo "thread $(cat $t/comm): $(cat $t/wchan) $(cut -d' ' -f3 $t/stat)"; done
		kill -9 $1
		hung=1
	fi
	wait $1
}
tab=$(printf '\t')
attached() { grep "${tab}attached${tab}" $log | grep -q "\"pid\": $1,"; }
# hold PID: stop a process just started, and let it go once the collector attached.
hold() {
	kill -STOP $1
	until_ok 120 attached $1 || cat $log
	kill -CONT $1
}

# collect CFG WORKLOAD...: one collector (its log and output in /out/CFG) for the
# workloads, run one after another, each in /out/CFG-WORKLOAD with its pid, by which the
# checks tell what each left (a server's decodes at start) from the others'.
collect() {
	cfg=$1; shift
	mkdir -p /out/$cfg && cd /out/$cfg
	log=/out/$cfg/collector.log out=/out/$cfg/profinfer-output.pb
	otelcol-profinfer --config /cfg/$cfg.yaml >$log 2>&1 &
	collector=$!
	until_ok 180 grep -q 'Everything is ready' $log || { cat $log; exit 1; }
	for w in "$@"; do
		mkdir -p /out/$cfg-$w && cd /out/$cfg-$w
		$(echo $w | tr - _)
	done
	# A metrics export with everything (collection_interval: the default's 10 s, full
	# tracing's 2 s), before the shutdown, which under emulation may outlast the
	# exporters' grace.
	if [ $cfg = full ]; then sleep 3; else sleep 11; fi
	stop $collector collector $log
	echo "$cfg $*: collector exited $?"
}

llama_bench() {
	llama-bench -m /models/${MODEL:-tiny-dense}.gguf -p 16 -n 16 -r 1 -t 2 --delay 1 -o json >bench.json 2>bench.err &
	bench=$!
	echo $bench >pid
	sleep 0.3
	hold $bench
	wait $bench || { echo "llama-bench failed"; cat bench.err; }
}

llama_server() {
	sh -c 'echo $$ >/sys/fs/cgroup/profinfer/cgroup.procs; exec "$@"' sh \
		llama-server -m /models/tiny-dense.gguf --host 127.0.0.1 --port 8080 -t 2 -c 512 -np 1 --no-warmup >server.log 2>&1 &
	server=$!
	echo $server >pid
	sleep 0.3
	hold $server
	until_ok 120 wget -q -O /dev/null http://127.0.0.1:8080/health || cat server.log
	timeout 180 wget -q -O completion.json --header 'Content-Type: application/json' \
		--post-data '{"prompt":"Once upon a time","n_predict":8,"temperature":0,"ignore_eos":true}' http://127.0.0.1:8080/completion ||
		{ echo "request failed or timed out"; tail -20 server.log; tail -20 $log; }
	# The request ends when its slot has been idle for a second.
	sleep 3
	# The quota is read at a metrics export, while the server lives.
	if [ "${PWD##*/}" = default-llama-server ]; then
		until_ok 30 grep -q profinfer.cgroup.cpu.limit $out || echo "no quota exported"
	fi
	stop $server llama-server server.log
}

llama_bench_moe() { MODEL=tiny-moe llama_bench; }
collect default llama-bench llama-server
if [ -f /models/tiny-moe.gguf ]; then
	collect full llama-bench llama-server llama-bench-moe
else
	collect full llama-bench llama-server
fi
exit ${hung:-0}
`

// BenchmarkKernelWindows measures what a sampling window costs the model in each kernel
// of the matrix, as stalled decode time: llama-bench tg128 on the tiny model under a
// collector without node probes, alternating with one that opens a window (2 graphs)
// every 200 ms, and with the same windows plus the barrier probe (three node probes
// instead of two, which shows whether closing costs per probe). Emulated kernels are
// slow, so only ratios within one boot are compared. Not part of make test:
//
//	go test -tags e2e -run '^$' -bench KernelWindows -benchtime 1x -timeout 60m ./receiver
func BenchmarkKernelWindows(b *testing.B) {
	env, kernels := vm.Require(b, "amd64")
	bin, _ := filepath.Abs("../bin/otelcol-profinfer")
	configs := map[string]string{
		"off":      "nodes: {mode: off}",
		"windows":  "nodes: {mode: sampled, sample_interval: 200ms, sample_graphs: 2}",
		"barriers": "nodes: {mode: sampled, sample_interval: 200ms, sample_graphs: 2, barriers: true}",
	}
	const rounds = 4
	for _, k := range kernels {
		files := &vm.Initramfs{}
		for guest, host := range map[string]string{
			"/usr/bin/otelcol-profinfer": bin,
			"/usr/bin/llama-bench":       env.Portable("llama-bench"),
			"/models/tiny-dense.gguf":    env.Model("tiny-dense"),
		} {
			if err := files.File(guest, host, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		for name, settings := range configs {
			files.Bytes("/cfg/"+name+".yaml", []byte(fmt.Sprintf(`
receivers:
  profinfer: {%s, roofline: {enabled: false}, collection_interval: 1s}
exporters:
  file: {path: ./out.jsonl}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    metrics: {receivers: [profinfer], exporters: [file]}
`, settings)), 0o644)
		}
		script := windowScript(rounds, []string{"off", "windows", "barriers"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		r, err := (&vm.Guest{Kernel: k, Files: files, Script: script}).Run(ctx, b.TempDir())
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		secs := map[string][]float64{} // seconds per token, by config
		windows := map[string][]float64{}
		for round := 1; round <= rounds; round++ {
			for name := range configs {
				dir := filepath.Join(r.Out, fmt.Sprintf("%s-%d", name, round))
				raw, err := os.ReadFile(filepath.Join(dir, "bench.json"))
				if err != nil {
					b.Fatalf("%v\n%s", err, r.Output)
				}
				rs, err := testbench.ParseBench(raw)
				if err != nil || len(rs) != 1 {
					b.Fatalf("%s: %v %s", dir, err, raw)
				}
				secs[name] = append(secs[name], 1/rs[0].AvgTS)
				_, metrics := (&collector{out: filepath.Join(dir, "out.jsonl")}).read(b, false)
				traced, _ := lastSum(metrics, "profinfer.graphs.traced")
				windows[name] = append(windows[name], float64(traced)/2)
			}
		}
		base := median(slices.Clone(secs["off"]))
		for _, name := range []string{"windows", "barriers"} {
			perToken, w := median(slices.Clone(secs[name]))-base, median(slices.Clone(windows[name]))
			b.Logf("Linux %s, %s: %.2f ms a token without node probes, +%.1f%% with a window every 200 ms "+
				"(%.0f windows in 128 tokens): %.1f ms of decode per window (rounds: off %v, %s %v)",
				k.Release, name, 1e3*base, 100*(median(slices.Clone(secs[name]))/base-1), w, 1e3*perToken*128/w, secs["off"], name, secs[name])
		}
	}
}

// windowScript runs llama-bench tg128 under each configuration in turn, rounds times,
// leaving each run's bench.json and out.jsonl in /out/CONFIG-ROUND.
func windowScript(rounds int, configs []string) string {
	return fmt.Sprintf(`
tab=$(printf '\t')
attached() { grep "${tab}attached${tab}" collector.log | grep -q "\"pid\": $1,"; }
for round in $(seq %d); do
	for cfg in %s; do
		mkdir -p /out/$cfg-$round && cd /out/$cfg-$round
		otelcol-profinfer --config /cfg/$cfg.yaml >collector.log 2>&1 &
		collector=$!
		until grep -q 'Everything is ready' collector.log; do sleep 0.2; done
		llama-bench -m /models/tiny-dense.gguf -p 0 -n 128 -r 1 -t 2 --delay 1 -o json >bench.json 2>bench.err &
		bench=$!
		sleep 0.3
		kill -STOP $bench
		until attached $bench; do sleep 0.2; done
		kill -CONT $bench
		wait $bench
		kill $collector; wait $collector
	done
done
`, rounds, strings.Join(configs, " "))
}
