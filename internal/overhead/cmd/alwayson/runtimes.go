package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// The targets of the runtimes beside llama.cpp itself: Ollama's runner, requests through
// Ollama's API, in steady state; and whisper.cpp's addon, a process per arm.

// ollamaServer is Ollama serving the test bench's model, and the runner it loaded it in.
type ollamaServer struct {
	*testbench.Ollama
	runner, tokens int
	models         string
}

func (o *ollamaServer) PID() int { return o.runner }

func (o *ollamaServer) Stop() {
	o.Ollama.Stop()
	os.RemoveAll(o.models)
}

// complete asks Ollama for the arm's tokens. It has no way to ignore the end of text:
// a request of the random model may end early. eval_duration times the tokens after the
// first, which the prompt's evaluation samples.
func (o *ollamaServer) complete(ctx context.Context) (int, float64, error) {
	t, err := o.Generate(ctx, "llama-1b", "Once upon a time", o.tokens, "") // kept loaded: OLLAMA_KEEP_ALIVE=-1
	if err != nil {
		return 0, 0, err
	}
	return t.EvalCount - 1, float64(t.EvalDuration) / 1e9, nil
}

// startOllama starts Ollama as it ships on the model, loads it with a first request (the
// model kept loaded throughout), and finds its runner.
func (m *meter) startOllama(ctx context.Context) error {
	models, err := os.MkdirTemp("", "profinfer-alwayson-ollama-")
	if err != nil {
		return err
	}
	o, err := testbench.StartOllama(ctx, m.env.OllamaExe(), models, "OLLAMA_KEEP_ALIVE=-1") // its threads: the cores, 2
	if err != nil {
		return err
	}
	s := &ollamaServer{Ollama: o, tokens: m.tokens, models: models}
	m.server = s
	if err := o.Create(ctx, "llama-1b", m.env.Model(m.model)); err != nil {
		return err
	}
	if err := warm(ctx, s); err != nil {
		return err
	}
	for pid, cmd := range children(o.PID()) {
		if strings.Contains(cmd, "--model") {
			s.runner = pid
		}
	}
	if s.runner == 0 {
		return fmt.Errorf("ollama serve loaded the model in no runner: %s", o.Stderr.String())
	}
	return nil
}

// children are the processes pid started that still run, with their command lines.
func children(pid int) map[int]string {
	out := map[int]string{}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, f := range strings.Fields(string(b)) {
			var child int
			fmt.Sscan(f, &child)
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
			out[child] = strings.ReplaceAll(string(cmd), "\x00", " ")
		}
	}
	return out
}

// whisperArm runs the arm's transcriptions of the test bench's recording with m.model,
// a process (of -runs transcriptions) after another: a transcription is the arm's unit,
// its time the driver's.
func (m *meter) whisperArm(ctx context.Context) (a arm, err error) {
	ipis0 := ipis()
	start := time.Now()
	for range m.runs {
		if err := m.whisperRun(ctx, &a, m.model, m.reps); err != nil {
			return a, err
		}
	}
	a.wall = time.Since(start).Seconds()
	a.ipis = ipis() - ipis0
	return a, nil
}

// whisperRun runs one whisper driver process of n transcriptions and adds what it
// measured to a.
func (m *meter) whisperRun(ctx context.Context, a *arm, model string, n int) error {
	node, args := testbench.Whisper{Model: model, Runs: n, Threads: threads}.Command(m.env, "node")
	p, err := testbench.Start(node, args...)
	if err != nil {
		return err
	}
	if err := p.Wait(ctx); err != nil {
		return err
	}
	var r testbench.WhisperResult
	if err := testbench.ParseLast(p.Stdout.Bytes(), &r); err != nil {
		return err
	}
	ru := p.Cmd.ProcessState.SysUsage().(*syscall.Rusage)
	a.tokens += n
	a.decode += r.Seconds
	a.cpu += (p.Cmd.ProcessState.UserTime() + p.Cmd.ProcessState.SystemTime()).Seconds()
	a.faults += float64(ru.Minflt + ru.Majflt)
	return nil
}

// warmUp runs a short process of the target's binary under the collector before its
// arm, so that the arm's process is not the first of its binary the collector sees.
func (m *meter) warmUp(ctx context.Context) error {
	if m.server == nil && strings.HasPrefix(m.model, "whisper") {
		var a arm
		if err := m.whisperRun(ctx, &a, "whisper-micro", 1); err != nil {
			return fmt.Errorf("warm-up transcription: %w", err)
		}
		return nil
	}
	if _, err := testbench.Run(ctx, m.env.Bin("llama-bench"), m.env.BenchArgs(m.model, 0, 1, threads, 1)...); err != nil {
		return fmt.Errorf("warm-up llama-bench: %w", err)
	}
	return nil
}
