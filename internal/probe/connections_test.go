//go:build e2e

package probe

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/events"
)

// A traced server's connections: Go's net/http (accept4, read, write, as Ollama's runners)
// sends a record when each request arrives and one when it is answered, two requests on
// one kept-alive connection; a socket read and written with recvfrom and sendto (as
// cpp-httplib's) likewise, and its close unanswered says so. A file read, and the client
// ends of the connections, send nothing. The kernel matrix runs this in each kernel it
// boots.
func TestE2EConnections(t *testing.T) {
	k := probeKernel(t)
	l, err := Load(LoadConfig{RingBufferSize: 1 << 20}, k, btf.NewCache())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	links, err := Tracepoints(&l.ProfinferPrograms, Layers{Connections: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(links)
	rd, err := ringbuf.NewReader(l.Events)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	pid := os.Getpid()
	if err := Trace(&l.ProfinferMaps, pid, true); err != nil {
		t.Fatal(err)
	}
	defer Trace(&l.ProfinferMaps, pid, false)

	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		t.Fatal(err)
	}
	// net/http: two requests on one connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	for range 2 {
		resp, err := client.Get("http://" + ln.Addr().String() + "/completion")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()

	// recvfrom and sendto: a request answered, then one whose connection closes unanswered.
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	peer, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	accepted, err := raw.Accept()
	if err != nil {
		t.Fatal(err)
	}
	f, err := accepted.(*net.TCPConn).File() // a blocking duplicate: recvfrom waits for the bytes
	accepted.Close()
	if err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	recv := func() {
		peer.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		buf := make([]byte, 64)
		if _, _, err := unix.Recvfrom(fd, buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	recv()
	if err := unix.Sendto(fd, []byte("HTTP/1.1 200 OK\r\n\r\n"), 0, nil); err != nil {
		t.Fatal(err)
	}
	recv()
	f.Close()

	var got []string
	var rec ringbuf.Record
	var ev events.Event
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		rd.SetDeadline(time.Now().Add(100 * time.Millisecond))
		err := rd.ReadInto(&rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case err != nil:
			t.Fatal(err)
		}
		if err := events.Parse(rec.RawSample, &ev); err != nil {
			t.Fatal(err)
		}
		if int(ev.PID) != pid || (ev.Kind != events.Received && ev.Kind != events.Replied) {
			continue
		}
		s := ev.Kind.String()
		if ev.Flags&events.FlagClosed != 0 {
			s += " closed"
		}
		got = append(got, fmt.Sprintf("%s %d", s, ev.FD()))
	}
	// net/http's connection first, its fd whichever it was given.
	var httpFD uint32
	if len(got) > 0 {
		fmt.Sscanf(got[0], "received %d", &httpFD)
	}
	want := []string{fmt.Sprintf("received %d", httpFD), fmt.Sprintf("replied %d", httpFD), fmt.Sprintf("received %d", httpFD), fmt.Sprintf("replied %d", httpFD),
		fmt.Sprintf("received %d", fd), fmt.Sprintf("replied %d", fd), fmt.Sprintf("received %d", fd), fmt.Sprintf("replied closed %d", fd)}
	if !slices.Equal(got, want) {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
