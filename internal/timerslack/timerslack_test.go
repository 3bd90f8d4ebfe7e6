package timerslack

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Every thread gets the slack, and so do threads started after: they inherit it. As
// root (CI), every thread; without CAP_SYS_NICE, the caller's alone, and the error says
// why.
func TestSet(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	block(&wg, stop, 4) // threads of the process's own, so that it has several

	const slack = 3 * time.Millisecond
	set, threads, err := Set(slack)
	if threads < 4 || set < 1 {
		t.Fatalf("set on %d of %d threads (%v)", set, threads, err)
	}
	if unix.Geteuid() != 0 {
		if !errors.Is(err, ErrPrivilege) {
			t.Fatalf("not root: %d of %d threads set, error %v; want ErrPrivilege", set, threads, err)
		}
		t.Skip("not root: the other threads' slack needs CAP_SYS_NICE")
	}
	if err != nil || set != threads {
		t.Fatalf("set on %d of %d threads: %v", set, threads, err)
	}
	block(&wg, stop, 6) // each needs a thread: some are new
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) <= threads {
		t.Fatalf("%d threads after blocking 6 more goroutines, %d before: none started", len(ents), threads)
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if got, err := Of(tid); err != nil || got != slack {
			t.Errorf("thread %d: slack %s (%v), want %s", tid, got, err, slack)
		}
	}
	if _, _, err := Set(-time.Millisecond); err == nil {
		t.Error("a negative slack was accepted")
	}
}

// block parks n goroutines in read(2) on pipes until stop, each holding a thread.
func block(wg *sync.WaitGroup, stop chan struct{}, n int) {
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			panic(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [1]byte
			unix.Read(int(r.Fd()), b[:]) // a raw read blocks the thread, not only the goroutine
			r.Close()
		}()
		go func() { <-stop; w.Close() }()
	}
	time.Sleep(50 * time.Millisecond)
}
