package watch

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/testbench"
)

// open loads the hooks against a fresh traced map, the loader's a uprobe_multi link where
// the kernel has them, or ends the test when it cannot.
func open(t *testing.T) (*Watcher, *ebpf.Map) {
	t.Helper()
	return openKind(t, features.HaveBPFLinkUprobeMulti() == nil)
}

func openKind(t *testing.T, multi bool) (*Watcher, *ebpf.Map) {
	t.Helper()
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root (eBPF)")
	}
	traced, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { traced.Close() })
	w, err := Open(traced, btf.NewCache(), multi)
	if w == nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("loader hook: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w, traced
}

// notices reads a watcher's notices one at a time.
type notices struct {
	w    *Watcher
	read []Notice // read and not yet looked at
}

// until reads the notices about pid up to the first of kind want, and returns it and the
// kinds of those before it. It fails after a second without one.
func (ns *notices) until(t *testing.T, pid int, want Kind) (Notice, []Kind) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	var before []Kind
	for {
		if len(ns.read) == 0 {
			var err error
			if ns.read, err = ns.w.Read(deadline, nil); err != nil {
				t.Fatalf("no notice of kind %d about pid %d (saw %v): %v", want, pid, before, err)
			}
		}
		n := ns.read[0]
		ns.read = ns.read[1:]
		if n.PID != pid {
			continue
		}
		if n.Kind == want {
			return n, before
		}
		before = append(before, n.Kind)
	}
}

// A dynamic executable is noticed at exec and again when its loader has loaded its
// libraries; once traced, its image replaced and its exit are noticed too.
func TestNotices(t *testing.T) {
	t.Run("uprobe", func(t *testing.T) { testNotices(t, false) })
	t.Run("uprobe_multi", func(t *testing.T) {
		if err := features.HaveBPFLinkUprobeMulti(); err != nil {
			t.Skipf("this kernel has no uprobe_multi links: %v", err)
		}
		testNotices(t, true)
	})
}

// The loader's hook is found and noticed as either kind of link; a process whose
// loader it is adds no other.
func testNotices(t *testing.T, multi bool) {
	w, traced := openKind(t, multi)
	if len(w.loaders) == 0 {
		t.Fatal("no loader hooked in profinfer's own root")
	}
	links := len(w.links)
	if err := w.Follow("/proc/self"); err != nil || len(w.links) != links {
		t.Errorf("following the test's own process: %v, %d links after %d", err, len(w.links), links)
	}
	ns := &notices{w: w}
	// sh execs sleep in place: one process, two images.
	cmd := exec.Command("/bin/sh", "-c", "read x; exec sleep 0.2")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// The exec's notice, then the loader's (it calls its hook twice as it starts).
	ns.until(t, pid, Mapped)
	ns.until(t, pid, Mapped)
	time.Sleep(100 * time.Millisecond) // sh is reading
	if err := traced.Put(uint32(pid), uint32(0)); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if _, before := ns.until(t, pid, Execed); slices.Contains(before, Exited) {
		t.Fatalf("notices %v before the exec", before)
	}
	ns.until(t, pid, Mapped) // sleep's loader
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, before := ns.until(t, pid, Exited); slices.Contains(before, Execed) {
		t.Fatalf("notices %v before the exit", before)
	}
}

// An untraced process's exit is not reported, and Close ends a blocked Read.
func TestUntracedExitAndClose(t *testing.T) {
	w, _ := open(t)
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := w.Read(time.Now().Add(300*time.Millisecond), nil)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range got {
			if n.PID == cmd.Process.Pid && n.Kind != Mapped {
				t.Fatalf("notice %+v about an untraced process", n)
			}
		}
	}
	// Other processes' execs (other tests' packages run beside this one) may end a read
	// before Close: read on until one ends in an error.
	done := make(chan error)
	go func() {
		for {
			if _, err := w.Read(time.Now().Add(time.Minute), nil); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	w.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked Read")
	}
}

// A read returns every notice that came before it at once: three execs of a dynamic
// program, each noticed at exec and twice by its loader, come in one read.
func TestReadGathers(t *testing.T) {
	w, _ := open(t)
	pids := map[int]int{}
	for range 3 {
		cmd := exec.Command("/bin/true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pids[cmd.Process.Pid] = 0
	}
	time.Sleep(100 * time.Millisecond)
	got, err := w.Read(time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range got {
		if _, ok := pids[n.PID]; ok {
			pids[n.PID]++
		}
	}
	for pid, n := range pids {
		if n != 3 {
			t.Errorf("pid %d: %d notices in the read, want 3 (by pid: %v; read %d in all)", pid, n, pids, len(got))
		}
	}
	again, err := w.Read(time.Now(), nil)
	if slices.ContainsFunc(again, func(n Notice) bool { _, ok := pids[n.PID]; return ok }) {
		t.Errorf("a second read has some of theirs again: %v (%v)", again, err)
	}
}

// A traced process's exit notice says how it ended: its exit status, the signal that
// killed it, and whether the OOM killer chose it (here for its memory cgroup's limit).
func TestExitCauses(t *testing.T) {
	w, traced := open(t)
	ns := &notices{w: w}
	for _, c := range []struct {
		name, script string
		limit        int64 // a memory cgroup's, if any
		code, signal int
		oom          bool
	}{
		{name: "exit", script: "exit 3", code: 3},
		{name: "signal", script: "kill -TERM $$", signal: 15},
		{name: "oom", script: "exec tail /dev/zero", limit: 32 << 20, signal: 9, oom: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			name, args := "/bin/sh", []string{"-c", "read x; " + c.script}
			if c.limit > 0 {
				name, args = testbench.MemoryLimit(t, c.limit).Command(name, args...)
			}
			cmd := exec.Command(name, args...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			if err := traced.Put(uint32(pid), uint32(0)); err != nil {
				t.Fatal(err)
			}
			start := monotonic()
			stdin.Close()
			_ = cmd.Wait()
			n, _ := ns.until(t, pid, Exited)
			e := n.Exit
			if e.Code() != c.code || e.Signal() != c.signal || e.OOM != c.oom || e.At < start || e.At > monotonic() {
				t.Errorf("exit %+v: code %d, signal %d, OOM %v; want %d, %d, %v, at after %d", e, e.Code(), e.Signal(), e.OOM,
					c.code, c.signal, c.oom, start)
			}
		})
	}
}

func monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
