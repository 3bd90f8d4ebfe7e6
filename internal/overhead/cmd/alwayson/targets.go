package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
	"github.com/prometheus/procfs"
)

// server is a target that serves the same requests throughout.
type server interface {
	PID() int // the process that computes them
	// complete makes a request, and returns the tokens generated after the first and
	// their time, as the server timed them.
	complete(ctx context.Context) (tokens int, decode float64, err error)
	Stop()
}

// llamaServer is a llama-server generating tokens tokens a request.
type llamaServer struct {
	*testbench.Server
	tokens int
}

func (m *meter) startServer(ctx context.Context) error {
	s, err := m.env.StartServer(ctx, m.env.Bin("llama-server"), m.model, threads)
	if err != nil {
		return err
	}
	m.server = llamaServer{s, m.tokens}
	return warm(ctx, m.server)
}

// warm makes the first requests, which fault the weights in and size the buffers.
func warm(ctx context.Context, s server) error {
	for range 2 {
		if _, _, err := s.complete(ctx); err != nil {
			return err
		}
	}
	return nil
}

// timings are llama-server's own account of a request.
type timings struct {
	PredictedN  int     `json:"predicted_n"`
	PredictedMS float64 `json:"predicted_ms"`
}

func (s llamaServer) complete(ctx context.Context) (int, float64, error) {
	body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": s.tokens,
		"temperature": 0, "ignore_eos": true, "cache_prompt": false})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/completion", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("llama-server: %s", resp.Status)
	}
	var r struct {
		Timings timings `json:"timings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, 0, err
	}
	if r.Timings.PredictedN != s.tokens {
		return 0, 0, fmt.Errorf("llama-server generated %d tokens, want %d", r.Timings.PredictedN, s.tokens)
	}
	return r.Timings.PredictedN, r.Timings.PredictedMS / 1e3, nil
}

// usage is a process's CPU seconds and page faults so far, its exited threads' included.
func usage(pid int) (cpu, faults float64, err error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, 0, err
	}
	return st.CPUTime(), float64(st.MinFlt + st.MajFlt), nil
}

// serverArm sends the arm's requests to the running server.
func (m *meter) serverArm(ctx context.Context) (a arm, err error) {
	cpu0, faults0, err := usage(m.server.PID())
	if err != nil {
		return a, err
	}
	ipis0 := ipis()
	if m.sample {
		smp, serr := startSampling(m.server.PID())
		if serr != nil {
			return a, serr
		}
		defer smp.stopInto(ctx, &a, &err)
	}
	start := time.Now()
	for time.Since(start) < m.arm {
		tokens, decode, err := m.server.complete(ctx)
		if err != nil {
			return a, err
		}
		a.tokens += tokens
		a.decode += decode
	}
	a.wall = time.Since(start).Seconds()
	a.ipis = ipis() - ipis0
	cpu1, faults1, err := usage(m.server.PID())
	a.cpu, a.faults = cpu1-cpu0, faults1-faults0
	return a, err
}

// benchArm runs m.runs llama-bench decode tests, one process after another, each to
// completion. Its CPU time includes the models' loads, which are the same in both arms.
func (m *meter) benchArm(ctx context.Context) (a arm, err error) {
	ipis0 := ipis()
	start := time.Now()
	for range m.runs {
		if err := m.benchRun(ctx, &a); err != nil {
			return a, err
		}
	}
	a.wall = time.Since(start).Seconds()
	a.ipis = ipis() - ipis0
	return a, nil
}

// benchRun runs one llama-bench process and adds what it measured to a.
func (m *meter) benchRun(ctx context.Context, a *arm) (err error) {
	p, err := testbench.Start(m.env.Bin("llama-bench"), m.env.BenchArgs(m.model, 0, m.tokens, threads, m.reps)...)
	if err != nil {
		return err
	}
	if m.sample { // from the start: threads started later are sampled too
		smp, serr := startSampling(p.PID())
		if serr != nil {
			p.Stop()
			return serr
		}
		defer smp.stopInto(ctx, a, &err)
	}
	// llama-bench loads the model on one thread and starts the others at its first
	// graph: from then on the model needs every core, and the collector's CPU costs it.
	// Polled only until then, not beside the decode.
	var loadFrom time.Duration
	if m.collectorPID != 0 {
		loadFrom, _, _ = threadTotals(m.collectorPID)
	}
	for !p.Exited() && ctx.Err() == nil {
		if st, err := procfs.NewProc(p.PID()); err == nil {
			if stat, err := st.Stat(); err == nil && stat.NumThreads >= threads {
				if m.collectorPID != 0 {
					cpu, _, _ := threadTotals(m.collectorPID)
					a.loadCollector += (cpu - loadFrom).Seconds()
				}
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.Wait(ctx); err != nil {
		return err
	}
	rs, err := testbench.ParseBench(p.Stdout.Bytes())
	if err != nil {
		return err
	}
	if len(rs) != 1 || rs[0].AvgTS <= 0 {
		return fmt.Errorf("llama-bench: %d results, want 1", len(rs))
	}
	ru := p.Cmd.ProcessState.SysUsage().(*syscall.Rusage)
	tokens := m.tokens * m.reps
	a.tokens += tokens
	a.decode += float64(tokens) / rs[0].AvgTS
	a.cpu += (p.Cmd.ProcessState.UserTime() + p.Cmd.ProcessState.SystemTime()).Seconds()
	a.faults += float64(ru.Minflt + ru.Majflt)
	return nil
}
