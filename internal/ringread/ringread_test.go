package ringread

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/profinfer/profinfer/internal/testbench"
)

// ring makes a ring buffer, a reader of it, and a program that submits an 8-byte record
// to it with the given flags when run.
func ring(t *testing.T, flags int64) (*Reader, func()) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 4096})
	if err != nil {
		testbench.Missing(t, "creating a BPF ring buffer (root?): "+err.Error())
	}
	t.Cleanup(func() { m.Close() })
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SocketFilter,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R1, 42),
			asm.StoreMem(asm.RFP, -8, asm.R1, asm.DWord),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.Mov.Imm(asm.R3, 8),
			asm.Mov.Imm(asm.R4, int32(flags)),
			asm.FnRingbufOutput.Call(),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	r, err := NewReader(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, func() {
		if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 14)}); err != nil {
			t.Error(err)
		}
	}
}

// later runs f after d; the function it returns waits for f to have run.
func later(d time.Duration, f func()) (wait func()) {
	done := make(chan struct{})
	time.AfterFunc(d, func() { f(); close(done) })
	return func() { <-done }
}

const (
	noWakeup    = 1 // BPF_RB_NO_WAKEUP
	forceWakeup = 2 // BPF_RB_FORCE_WAKEUP
)

func TestWakeupAndDeadline(t *testing.T) {
	r, submit := ring(t, forceWakeup)
	var rec ringbuf.Record
	start := time.Now()
	if err := r.ReadInto(&rec, start.Add(100*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("empty ring: %v, want a deadline", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("returned after %v, before its deadline", d)
	}
	defer later(50*time.Millisecond, submit)()
	start = time.Now()
	if err := r.ReadInto(&rec, start.Add(10*time.Second)); err != nil || len(rec.RawSample) != 8 || rec.RawSample[0] != 42 {
		t.Fatalf("woken: %v, %v", err, rec.RawSample)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a forced wakeup took %v", d)
	}
}

// A record submitted without a wakeup waits for the deadline, and is read then.
func TestNoWakeup(t *testing.T) {
	r, submit := ring(t, noWakeup)
	defer later(20*time.Millisecond, submit)()
	var rec ringbuf.Record
	start := time.Now()
	err := r.ReadInto(&rec, start.Add(300*time.Millisecond))
	if d := time.Since(start); err != nil || d < 300*time.Millisecond {
		t.Fatalf("got %v after %v; want the record at the deadline", err, d)
	}
}

func TestFlushAndClose(t *testing.T) {
	r, submit := ring(t, noWakeup)
	submit()
	submit()
	defer later(20*time.Millisecond, func() { _ = r.Flush() })()
	var rec ringbuf.Record
	for i := range 2 {
		if err := r.ReadInto(&rec, time.Time{}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := r.ReadInto(&rec, time.Time{}); !errors.Is(err, ringbuf.ErrFlushed) {
		t.Fatalf("after the records: %v, want ErrFlushed", err)
	}
	// Records before a flush come before its ErrFlushed, even when the flush is seen first.
	submit()
	_ = r.Flush()
	if err := r.ReadInto(&rec, time.Time{}); err != nil {
		t.Fatalf("record before the flush: %v", err)
	}
	if err := r.ReadInto(&rec, time.Time{}); !errors.Is(err, ringbuf.ErrFlushed) {
		t.Fatalf("then: %v, want ErrFlushed", err)
	}
	defer later(20*time.Millisecond, func() { _ = r.Close() })()
	if err := r.ReadInto(&rec, time.Time{}); !errors.Is(err, ringbuf.ErrClosed) {
		t.Fatalf("closed while waiting: %v, want ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// Wake returns a waiting ReadInto with ErrWoken once the ring is empty, once; the ring's
// high-water mark is the most it held at a read.
func TestWake(t *testing.T) {
	r, submit := ring(t, noWakeup)
	defer later(20*time.Millisecond, func() { _ = r.Wake() })()
	var rec ringbuf.Record
	start := time.Now()
	if err := r.ReadInto(&rec, time.Time{}); !errors.Is(err, ErrWoken) || time.Since(start) > 5*time.Second {
		t.Fatalf("woken while waiting: %v after %v, want ErrWoken", err, time.Since(start))
	}
	submit()
	submit()
	_ = r.Wake()
	for i := range 2 {
		if err := r.ReadInto(&rec, time.Time{}); err != nil {
			t.Fatalf("record %d before the wake: %v", i, err)
		}
	}
	if err := r.ReadInto(&rec, time.Time{}); !errors.Is(err, ErrWoken) {
		t.Fatalf("after the records: %v, want ErrWoken", err)
	}
	if err := r.ReadInto(&rec, time.Now().Add(50*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("woken twice: %v", err)
	}
	if h := r.HighWater(); h < 2*16 {
		t.Fatalf("high-water mark %d bytes, want at least the two records", h)
	}
}
