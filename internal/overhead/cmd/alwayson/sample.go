package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// uprobePath names the kernel functions a probe hit runs under: the breakpoint's
// exception with the uprobe handling on its way back to user space (and the programs it
// runs), and the return probes' trampoline system call (6.11 and later) or its breakpoint.
var uprobePath = []string{"asm_exc_int3", "uprobe_notify_resume", "handle_swbp", "__x64_sys_uretprobe", "uprobe_handle_trampoline"}

// sampler samples a process's CPU (perf record -e cpu-clock: software sampling works in
// any guest) with call chains, to find the share its threads spend in the uprobe path:
// the traps measured where they happen, rather than estimated per hit.
type sampler struct {
	cmd  *exec.Cmd
	file string
}

// sampleRate is how often each CPU is sampled: at 40 ms a token on 2 CPUs, some 160
// samples a token, and the uprobe path's 0.1% of them a few hundred an arm.
const sampleRate = 1999

func startSampling(pid int) (*sampler, error) {
	f, err := os.CreateTemp("", "alwayson-*.perf")
	if err != nil {
		return nil, err
	}
	f.Close()
	cmd := exec.Command("perf", "record", "-q", "-e", "cpu-clock", "-F", strconv.Itoa(sampleRate), "-g",
		"-p", strconv.Itoa(pid), "-o", f.Name())
	if err := cmd.Start(); err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("perf record (install linux-perf): %w", err)
	}
	s := &sampler{cmd: cmd, file: f.Name()}
	// A short arm could otherwise end before perf has its counters open, and leave it
	// no samples to write.
	if err := testbench.WaitPerf(cmd.Process.Pid, 30*time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.Remove(f.Name())
		return nil, err
	}
	return s, nil
}

// stopInto ends the sampling and, if the run succeeded (*err is nil), adds its counts to
// a or puts its own failure in *err. Deferred, it stops perf on every path out of a run.
func (s *sampler) stopInto(ctx context.Context, a *arm, err *error) {
	samples, inPath, serr := s.stop(ctx)
	if *err == nil {
		a.samples, a.inPath, *err = a.samples+samples, a.inPath+inPath, serr
	}
}

// stop ends the sampling (perf ends by itself when the process exits) and counts the
// samples, and those in the uprobe path.
func (s *sampler) stop(ctx context.Context) (samples, inPath int, err error) {
	defer os.Remove(s.file)
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	if err := s.cmd.Wait(); err != nil && s.cmd.ProcessState.ExitCode() > 0 {
		return 0, 0, fmt.Errorf("perf record: %w", err)
	}
	out, err := exec.CommandContext(ctx, "perf", "script", "-i", s.file, "-F", "ip,sym").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("perf script: %w", err)
	}
	samples, inPath = countPath(out)
	return samples, inPath, nil
}

// countPath counts perf script's samples (call chains separated by blank lines) and
// those with a frame in the uprobe path.
func countPath(out []byte) (samples, inPath int) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inSample, hit := false, false
	end := func() {
		if inSample {
			samples++
			if hit {
				inPath++
			}
		}
		inSample, hit = false, false
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			end()
			continue
		}
		inSample = true
		if f := strings.Fields(line); len(f) >= 2 && slices.Contains(uprobePath, f[1]) {
			hit = true
		}
	}
	end()
	return samples, inPath
}
