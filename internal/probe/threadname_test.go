//go:build e2e

package probe

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/events"
)

// A traced process's thread that takes a name sends it, as lavapipe's threads do when the
// device is made: a short job's device is known though the job exits before its records
// are read. An untraced process's names send nothing. The kernel matrix runs this in each
// kernel it boots.
func TestE2EThreadName(t *testing.T) {
	k := probeKernel(t)
	l, err := Load(LoadConfig{RingBufferSize: 1 << 20}, k, btf.NewCache())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	links, err := Tracepoints(&l.ProfinferPrograms, Layers{Runtime: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(links)
	rd, err := ringbuf.NewReader(l.Events)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()

	// name names a thread of this process, locked to it, and returns its id.
	name := func(comm string) int {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread() // the thread ends with the goroutine: its name goes with it
			b, err := unix.BytePtrFromString(comm)
			if err == nil {
				err = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(b)), 0, 0, 0)
			}
			if err != nil {
				t.Error(err)
			}
			tid <- unix.Gettid()
		}()
		return <-tid
	}
	name("llvmpipe-9") // not traced yet
	pid := os.Getpid()
	if err := Trace(&l.ProfinferMaps, pid, true); err != nil {
		t.Fatal(err)
	}
	defer Trace(&l.ProfinferMaps, pid, false)
	tid := name("llvmpipe-7")

	var rec ringbuf.Record
	var ev events.Event
	// The record wakes no one: the reader comes on its own, as the profiler's does.
	for end := time.Now().Add(5 * time.Second); ; {
		rd.SetDeadline(time.Now().Add(100 * time.Millisecond))
		err := rd.ReadInto(&rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Now().After(end):
			t.Fatal("no record of the name taken")
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case err != nil:
			t.Fatal(err)
		}
		if err := events.Parse(rec.RawSample, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind != events.ThreadName {
			continue
		}
		if ev.Name() == "llvmpipe-9" {
			t.Fatal("a name taken before the process was traced was sent")
		}
		if int(ev.PID) != pid || int(ev.TID) != tid || ev.Name() != "llvmpipe-7" {
			t.Fatalf("thread %d of %d named %q, want %d of %d named llvmpipe-7", ev.TID, ev.PID, ev.Name(), tid, pid)
		}
		return
	}
}
