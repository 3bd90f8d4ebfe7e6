//go:build e2e

package receiver

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// A run's setup is on its resource, each attribute as the truth has it: llama.cpp's build
// as the tool's --version (and llama-bench's own report) says, the context's batch sizes
// as llama-bench was told (-b, -ub), the CPU backend's variant from the library the
// process maps, the OS from uname -r. node-llama-cpp's prebuilt, which loads a CPU
// variant of its own, records its build in its common library.
func TestE2ESetup(t *testing.T) {
	e := testbench.Require(t)
	out, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	kernel := strings.TrimSpace(string(out))

	t.Run("llama-bench", func(t *testing.T) {
		bench := e.Bin("llama-bench")
		out, _ := exec.Command(bench, "--version").CombinedOutput()
		v := regexp.MustCompile(`version: .* \(build (\d+), commit (\w+)\)`).FindSubmatch(out)
		if v == nil {
			t.Fatalf("llama-bench --version: %s", out)
		}
		number, _ := strconv.Atoi(string(v[1]))
		var variant string
		r := profileRun(t, 5*time.Minute, bench, "", func(_ *collector, p *testbench.Process) {
			variant = mappedVariant(t, p)
		}, bench, e.BenchArgs("llama-1b-q4_0", 32, 8, 2, 1, "-b", "32", "-ub", "16")...)
		var report []struct {
			Commit string `json:"build_commit"`
			Number int    `json:"build_number"`
			Batch  int    `json:"n_batch"`
			Ubatch int    `json:"n_ubatch"`
		}
		if err := json.Unmarshal(r.proc.Stdout.Bytes(), &report); err != nil || len(report) == 0 {
			t.Fatalf("llama-bench's report: %v: %s", err, r.proc.Stdout.String())
		}
		for _, b := range report {
			if b.Commit != string(v[2]) || b.Number != number || b.Batch != 32 || b.Ubatch != 16 {
				t.Fatalf("llama-bench reports %+v; --version says build %d, commit %s, and it was told -b 32 -ub 16", b, number, v[2])
			}
		}
		checkSetup(t, r, map[string]any{
			"llama.build.number":        int64(number),
			"llama.build.commit":        string(v[2]),
			"llama.context.batch_size":  int64(32),
			"llama.context.ubatch_size": int64(16),
			"ggml.cpu.variant":          variant,
			"os.type":                   "linux",
			"os.version":                kernel,
		})
	})

	t.Run("node-llama-cpp", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			testbench.Missing(t, "node")
		}
		var variant string
		r := profileRun(t, 5*time.Minute, node, "", func(_ *collector, p *testbench.Process) {
			variant = mappedVariant(t, p)
		}, node, e.NodeArgs("llama-1b-q4_0", 8, 2, 1)...)
		if variant == "" {
			t.Fatal("node-llama-cpp mapped no CPU variant's library: the variant would not be tested")
		}
		// Its common library's LLAMA_BUILD_NUMBER and LLAMA_COMMIT, by hand: nm, and the
		// string that its relocation's addend points to.
		checkSetup(t, r, map[string]any{
			"llama.build.number": int64(1),
			"llama.build.commit": "0ad4a86",
			"ggml.cpu.variant":   variant,
			"os.type":            "linux",
			"os.version":         kernel,
		})
		res := lastResource(t, r)
		batch, _ := res["llama.context.batch_size"].(int64)
		ubatch, _ := res["llama.context.ubatch_size"].(int64)
		t.Logf("llama.context.batch_size = %d, ubatch_size = %d", batch, ubatch)
		if batch <= 0 || ubatch <= 0 || ubatch > batch || batch > 512 {
			t.Errorf("batch sizes %v, %v: want 0 < n_ubatch <= n_batch <= its context's 512", res["llama.context.batch_size"], res["llama.context.ubatch_size"])
		}
	})
}

// mappedVariant follows process p's mappings to its end, and returns the variant that
// names the library of ggml's CPU backend it mapped last: ggml's loader maps each variant
// in turn to score it, then keeps the best one alone. "" for a plain libggml-cpu.so.
func mappedVariant(t *testing.T, p *testbench.Process) string {
	t.Helper()
	lib := regexp.MustCompile(`/libggml-cpu(?:-([^/\s]+?))?\.so`)
	var last map[string]string // path: variant
	for deadline := time.Now().Add(5 * time.Minute); !p.Exited() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.PID()))
		seen := map[string]string{}
		for _, m := range lib.FindAllSubmatch(maps, -1) {
			seen[string(m[0])] = string(m[1])
		}
		if len(seen) > 0 {
			last = seen
		}
	}
	if len(last) != 1 {
		t.Fatalf("pid %d mapped CPU backends %v last, want one", p.PID(), last)
	}
	for _, v := range last {
		return v
	}
	return ""
}

// lastResource is the resource of the run's process on its last spans.
func lastResource(t *testing.T, r run) map[string]any {
	t.Helper()
	pid := int64(r.proc.PID())
	for i := len(r.traces) - 1; i >= 0; i-- {
		rs := r.traces[i].ResourceSpans()
		for j := rs.Len() - 1; j >= 0; j-- {
			res := rs.At(j).Resource().Attributes().AsRaw()
			if res["process.pid"] == pid {
				return res
			}
		}
	}
	t.Fatalf("no spans of pid %d", pid)
	return nil
}

// checkSetup checks the run's last resource against want; an empty string wants the
// attribute absent.
func checkSetup(t *testing.T, r run, want map[string]any) {
	t.Helper()
	if strings.Contains(r.log, "build number or commit not reported") {
		t.Errorf("the build was not read:\n%s", r.log)
	}
	res := lastResource(t, r)
	for k, w := range want {
		got, ok := res[k]
		t.Logf("%s = %v (present %v)", k, got, ok)
		if w == "" && ok || w != "" && got != w {
			t.Errorf("%s = %v (present %v), want %q", k, got, ok, w)
		}
	}
}
