// Package ringread reads a BPF ring buffer, waiting for records in the Go runtime's
// poller rather than in a blocking epoll_wait.
//
// A goroutine blocked in a system call holds its P. While one is held, the runtime's
// monitor thread (sysmon) cannot sleep deeply: it polls every 20 µs, then ever less often,
// retakes the P after 10 ms and starts over. The collector's readers wait a second at a
// time, so each of their wakeups cost some hundred monitor wakeups on the cores the model
// runs on. Parked in the poller, a reader holds no P, and the monitor sleeps.
package ringread

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Reader reads one ring buffer from one goroutine; Flush and Close may be called from
// any.
type Reader struct {
	ring *ringbuf.Reader
	// file is a duplicate of the ring's descriptor, in the runtime's poller: the ring is
	// readable when a program submits with a wakeup.
	file *os.File
	conn syscall.RawConn

	mu       sync.Mutex // guards ring against Close: its AvailableBytes does not
	closed   atomic.Bool
	flushed  atomic.Bool // Flush was called
	woken    atomic.Bool // Wake was called
	flushing bool        // a flush was seen: ErrFlushed comes once the ring is drained
	high     int         // the most bytes the ring held at a read
}

// ErrWoken is what ReadInto returns, once, after Wake: the caller has other work.
var ErrWoken = errors.New("ring buffer reader woken")

// past makes the ring's reads return at once: waiting is the poller's.
var past = time.Unix(1, 0)

// NewReader returns a reader of ring buffer m.
func NewReader(m *ebpf.Map) (*Reader, error) {
	ring, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, err
	}
	ring.SetDeadline(past)
	fd, err := unix.FcntlInt(uintptr(m.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		err = unix.SetNonblock(fd, true) // so that os.NewFile puts it in the poller
	}
	if err != nil {
		ring.Close()
		return nil, fmt.Errorf("ring buffer %s: %w", m, err)
	}
	r := &Reader{ring: ring, file: os.NewFile(uintptr(fd), "ringbuf")}
	if r.conn, err = r.file.SyscallConn(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// ReadInto reads the next record into rec, waiting for one until deadline (none if
// zero). It returns os.ErrDeadlineExceeded when the deadline passes; ringbuf.ErrFlushed
// once after Flush, when every record submitted before the Flush has been read; ErrWoken
// once after Wake, when the ring is empty; and ringbuf.ErrClosed after Close.
func (r *Reader) ReadInto(rec *ringbuf.Record, deadline time.Time) error {
	for {
		if !r.flushing && r.flushed.Swap(false) {
			r.flushing = true
		}
		if err := r.read(rec); !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		// Caught up: the ring held nothing but what was read.
		if r.flushing {
			r.flushing = false
			return ringbuf.ErrFlushed
		}
		if r.woken.Swap(false) {
			return ErrWoken
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return os.ErrDeadlineExceeded
		}
		if err := r.wait(deadline); err != nil {
			return err
		}
	}
}

// read reads a record if the ring holds any; os.ErrDeadlineExceeded if it holds none.
func (r *Reader) read(rec *ringbuf.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return ringbuf.ErrClosed
	}
	n := r.ring.AvailableBytes()
	if n == 0 {
		return os.ErrDeadlineExceeded
	}
	r.high = max(r.high, n)
	return r.ring.ReadInto(rec)
}

// wait parks until the ring is readable, Flush or Close is called, or the deadline
// passes; only Close is an error.
func (r *Reader) wait(deadline time.Time) error {
	err := r.file.SetReadDeadline(deadline)
	if err == nil {
		err = r.conn.Read(func(uintptr) bool { return r.ready() })
	}
	switch {
	case r.closed.Load():
		return ringbuf.ErrClosed
	case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		return nil
	}
	return fmt.Errorf("waiting on the ring buffer: %w", err)
}

func (r *Reader) ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed.Load() || r.flushed.Load() || r.woken.Load() || r.ring.AvailableBytes() > 0
}

// Flush has ReadInto return ringbuf.ErrFlushed once it has read every record submitted
// so far.
func (r *Reader) Flush() error {
	if r.closed.Load() {
		return ringbuf.ErrClosed
	}
	r.flushed.Store(true)
	return r.file.SetReadDeadline(time.Now()) // wakes a ReadInto waiting
}

// Wake has a ReadInto waiting, or the next, return ErrWoken once the ring is empty.
func (r *Reader) Wake() error {
	if r.closed.Load() {
		return ringbuf.ErrClosed
	}
	r.woken.Store(true)
	return r.file.SetReadDeadline(time.Now())
}

// HighWater is the most bytes the ring held at a read: how far the reader fell behind.
// For the reading goroutine.
func (r *Reader) HighWater() int { return r.high }

// Close frees the reader; a ReadInto waiting returns ringbuf.ErrClosed.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	err := r.file.Close() // wakes a ReadInto waiting
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(err, r.ring.Close())
}
