//go:build e2e

package receiver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/vm"
)

// arm64Degradations are the warnings each arm64 kernel must print at start, once.
var arm64Degradations = map[string][]string{
	"6.1":  {"no uprobe_multi links (Linux 6.6)"},
	"6.12": nil,
}

// The arm64 kernels of the matrix, Debian 12's 6.1 and 6.12 on qemu's virt machine: the
// eBPF verifier test built for arm64, which loads the arm64 objects, and the arm64
// collector (make build-arm64) under the default configuration, unedited: it starts with
// no error and exactly the kernel's degradation warnings, measures this CPU's roofline
// with its NEON kernels, and exports.
func TestE2EARM64(t *testing.T) {
	_, kernels := vm.Require(t, "arm64")
	bin, _ := filepath.Abs("../build/linux-arm64/otelcol-profinfer")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v; run `make build-arm64`", bin, err)
	}
	verifier := filepath.Join(t.TempDir(), "probe.test")
	build := exec.Command("go", "test", "-c", "-tags", "e2e", "-o", verifier, "../internal/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the arm64 verifier test: %v\n%s", err, out)
	}
	defaultCfg, err := os.ReadFile("../config/otelcol.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kernels {
		t.Run(k.Name, func(t *testing.T) {
			files := &vm.Initramfs{}
			for guest, host := range map[string]string{"/usr/bin/otelcol-profinfer": bin, "/usr/bin/probe.test": verifier} {
				if err := files.File(guest, host, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			files.Bytes("/cfg/default.yaml", defaultCfg, 0o644)
			files.Dir("/var/lib/profinfer", 0o755)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			r, err := (&vm.Guest{Kernel: k, Files: files, Script: arm64Script}).Run(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Linux %s: init at %v, %v in all", k.Release, r.InitAt, r.Wall.Round(time.Second))
			if r.Status != 0 {
				t.Fatalf("guest script exited %d:\n%s", r.Status, r.Output)
			}
			verifierOut, _ := os.ReadFile(filepath.Join(r.Out, "verifier.txt"))
			if !strings.Contains(string(verifierOut), "\nPASS") {
				t.Errorf("verifier test on Linux %s:\n%s", k.Release, verifierOut)
			} else if m := regexp.MustCompile(`Linux [^:]*: .*`).Find(verifierOut); m != nil {
				t.Logf("%s", m)
			}
			logText, err := os.ReadFile(filepath.Join(r.Out, "collector.log"))
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
				for _, own := range arm64Degradations[k.Name] {
					if own == w {
						want = 1
					}
				}
				if got := strings.Count(log, w); got != want {
					t.Errorf("warning %q printed %d times on Linux %s, want %d", w, got, k.Release, want)
				}
			}
			// The roofline probe's NEON FMA and read loops, under emulation: far below a real
			// core, but measured.
			m := regexp.MustCompile(`"peak_flops": ([0-9.e+]+), "peak_bandwidth": ([0-9.e+]+)`).FindStringSubmatch(log)
			if m == nil {
				t.Fatalf("no roofline measured:\n%s", log)
			}
			flops, _ := strconv.ParseFloat(m[1], 64)
			bw, _ := strconv.ParseFloat(m[2], 64)
			t.Logf("roofline under emulation: %.2f GFLOP/s, %.2f GB/s", flops/1e9, bw/1e9)
			if flops < 1e7 || bw < 1e7 {
				t.Errorf("roofline peaks %g FLOP/s, %g B/s", flops, bw)
			}
			_, metrics := (&collector{out: filepath.Join(r.Out, "profinfer-output.jsonl")}).read(t, false)
			if len(metrics) == 0 {
				t.Errorf("no metrics exported")
			}
		})
	}
}

// arm64Script runs in each arm64 kernel: the verifier test, then the collector until a
// metrics export (collection_interval: 10s).
const arm64Script = `
set -u
/usr/bin/probe.test -test.run 'TestE2EVerifier' -test.v >/out/verifier.txt 2>&1
echo "verifier test exited $?"
cd /out
otelcol-profinfer --config /cfg/default.yaml >collector.log 2>&1 &
collector=$!
n=360
until grep -q 'Everything is ready' collector.log; do
	n=$((n - 1)); [ $n -gt 0 ] || { echo "the collector did not start"; cat collector.log; exit 1; }
	sleep 0.5
done
sleep 11
kill $collector; wait $collector
echo "collector exited $?"
`
