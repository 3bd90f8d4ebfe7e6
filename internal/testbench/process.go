package testbench

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Process is an engine process in its own process group, so that stopping it also stops
// anything it started.
type Process struct {
	Cmd    *exec.Cmd
	Stdout bytes.Buffer
	Stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// Start starts name with args and returns once it runs.
func Start(name string, args ...string) (*Process, error) {
	return startCmd(exec.Command(name, args...))
}

// startCmd starts cmd as Start does.
func startCmd(cmd *exec.Cmd) (*Process, error) {
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = &p.Stdout, &p.Stderr
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	return p, nil
}

// BusyLoop starts a neighbour that keeps a CPU busy: a shell loop on CPU cpu, or where
// the scheduler puts it where cpu < 0. It stops with the test, or before at its Stop.
func BusyLoop(t testing.TB, cpu int) *Process {
	t.Helper()
	args := []string{"sh", "-c", "while :; do :; done"}
	if cpu >= 0 {
		args = append([]string{"taskset", "-c", strconv.Itoa(cpu)}, args...)
	}
	p, err := Start(args[0], args[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// PID is the process id.
func (p *Process) PID() int { return p.Cmd.Process.Pid }

// Wait waits for the process to exit, killing its group when ctx ends first.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.Stop()
		return fmt.Errorf("%s: %w; stderr: %s", p.Cmd.Path, ctx.Err(), tail(p.Stderr.Bytes()))
	}
	if p.err != nil {
		return fmt.Errorf("%s: %w; stderr: %s", p.Cmd.Path, p.err, tail(p.Stderr.Bytes()))
	}
	return nil
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop ends the process group (SIGTERM, then SIGKILL after 5 s) and waits for the process.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
	}
}

// Run runs name with args to completion and returns its stdout.
func Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	p, err := Start(name, args...)
	if err != nil {
		return nil, err
	}
	err = p.Wait(ctx)
	return p.Stdout.Bytes(), err
}

func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
