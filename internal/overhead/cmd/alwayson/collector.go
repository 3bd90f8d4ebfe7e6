package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
	"github.com/prometheus/procfs"
)

// collector is a running collector, or the calibration's spinner.
type collector struct {
	proc     *testbench.Process
	dir      string
	startCPU float64 // its CPU seconds until it attached to the server; 0 for bench
}

// settle is how long the collector runs before an arm: its start-up work (a roofline
// probe on idle CPUs, the garbage of its initialisation) is not the steady state.
const settle = 5 * time.Second

// startCollector starts the collector in a directory of its own (the default
// configuration writes its output file there) and waits until it is ready, and with a
// server, until it attached to it; then lets it settle.
func (m *meter) startCollector(ctx context.Context) (*collector, error) {
	dir, err := os.MkdirTemp("", "profinfer-alwayson-")
	if err != nil {
		return nil, err
	}
	if m.load > 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		p, err := testbench.Start(self, "-spin", strconv.FormatFloat(m.load, 'g', -1, 64))
		return &collector{proc: p, dir: dir}, err
	}
	logPath := filepath.Join(dir, "collector.log")
	p, err := testbench.Start("sh", "-c", `cd "$1" && exec env $5 "$2" --config "$3" >"$4" 2>&1`, "sh", dir, m.collector, m.config, logPath, m.collectorEnv)
	if err != nil {
		return nil, err
	}
	c := &collector{proc: p, dir: dir}
	ready := "Everything is ready"
	if m.server != nil {
		ready = fmt.Sprintf(`"pid": %d, "exe"`, m.server.PID())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, _ := os.ReadFile(logPath)
		if bytes.Contains(out, []byte(ready)) && bytes.Contains(out, []byte("Everything is ready")) {
			break
		}
		if p.Exited() || time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("collector not ready: %s", out)
		}
		select {
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if m.server != nil {
		cpu, _, _ := threadTotals(p.PID())
		c.startCPU = cpu.Seconds()
	}
	if m.warm {
		if err := m.warmUp(ctx); err != nil {
			p.Stop()
			return nil, err
		}
	}
	time.Sleep(settle)
	return c, nil
}

// under runs an arm under collector c and stops it.
func (m *meter) under(ctx context.Context, c *collector, run func(context.Context) (arm, error)) (arm, error) {
	defer os.RemoveAll(c.dir)
	defer c.proc.Stop()
	cpu0, sw0, _ := threadTotals(c.proc.PID())
	bpf0, err := uprobeStats()
	if err != nil {
		return arm{}, err
	}
	m.collectorPID = c.proc.PID()
	defer func() { m.collectorPID = 0 }()
	a, err := run(ctx)
	if err != nil {
		return a, err
	}
	cpu1, sw1, _ := threadTotals(c.proc.PID())
	bpf1, err := uprobeStats()
	// bench: what it spent while the models loaded is apart
	a.collector = (cpu1 - cpu0).Seconds() - a.loadCollector
	a.wakeups = sw1 - sw0
	a.bpf = bpf1.minus(bpf0)
	return a, err
}

// threadTotals is pid's threads' time on a CPU, to the nanosecond (schedstat), and their
// context switches, voluntary and not, so far; and how many threads it has.
func threadTotals(pid int) (onCPU time.Duration, switches float64, n int) {
	ts, _ := procfs.AllThreads(pid)
	for _, t := range ts {
		if st, err := t.Schedstat(); err == nil {
			onCPU += time.Duration(st.RunningNanoseconds)
		}
		if st, err := t.NewStatus(); err == nil {
			switches += float64(st.TotalCtxtSwitches())
		}
	}
	return onCPU, switches, len(ts)
}

// ipis is the TLB shootdowns and function-call interrupts every CPU has taken so far: a
// probe's breakpoint written into a mapped page, or taken out, shoots the page's old
// translation down on the CPUs running the model.
func ipis() float64 {
	b, _ := os.ReadFile("/proc/interrupts")
	var n float64
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "TLB:" && f[0] != "CAL:") {
			continue
		}
		for _, c := range f[1:] {
			x, err := strconv.ParseFloat(c, 64)
			if err != nil {
				break
			}
			n += x
		}
	}
	return n
}

// spinFor keeps share of one core busy, in slices of a scheduler tick, until killed.
func spinFor(share float64) {
	const slice = 10 * time.Millisecond
	busy := time.Duration(share * float64(slice))
	for {
		start := time.Now()
		for time.Since(start) < busy {
		}
		time.Sleep(slice - busy)
	}
}
