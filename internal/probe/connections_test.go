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

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/sockets"
)

// A traced server's connections: Go's net/http (accept4, read, write, as Ollama's runners)
// sends a record when each request arrives and one when it is answered, two requests on
// one kept-alive connection; a socket read and written with recvfrom and sendto (as
// cpp-httplib's) likewise, and its close unanswered says so. A file read, and the client
// ends of the connections, send nothing. As another's front, a connection accepted before
// (found in /proc) sends its request as that one's. Both sets of programs: the socket
// tracepoints', and the syscalls' that stand in for them where a kernel has none. The
// kernel matrix runs this in each kernel it boots.
func TestE2EConnections(t *testing.T) {
	t.Run("syscalls", func(t *testing.T) { connections(t, ConnSyscalls) })
	t.Run("sockets", func(t *testing.T) {
		if !probeKernel(t).SockLength {
			t.Logf("Linux %s has no socket tracepoints: the syscalls' stand in", release())
			return
		}
		connections(t, ConnSockets)
	})
}

func connections(t *testing.T, set []string) {
	k := probeKernel(t)
	l, err := Load(LoadConfig{RingBufferSize: 1 << 20}, k, btf.NewCache())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	links, err := l.Programs.AttachSet(set)
	if err != nil {
		t.Fatal(err)
	}
	defer links.Close()
	if stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer stats.Close()
	}
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
	// Connection a stays open until the end: closed now, its socket's identity may be
	// the next one's (a guest on 6.12 gave b's records a's), and the two not told apart.
	defer client.CloseIdleConnections()

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

	peer.Close() // TCP closes the connection once both ends have
	var got []string
	var rec ringbuf.Record
	var ev events.Event
	conns := map[uint64]string{} // the connections in the order they came: a, b
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
		if conns[ev.Conn()] == "" {
			conns[ev.Conn()] = string(rune('a' + len(conns)))
		}
		got = append(got, s+" "+conns[ev.Conn()])
	}
	// net/http's connection (a), then the one read with recvfrom (b).
	want := []string{"received a", "replied a", "received a", "replied a", "received b", "replied b", "received b", "replied closed b"}
	if !slices.Equal(got, want) {
		t.Fatalf("records:\n%s\nwant:\n%s\nthe programs' runs: %s", strings.Join(got, "\n"), strings.Join(want, "\n"), runs(links))
	}

	// This process as the front of another (ollama serve's for its runner): a request
	// here, accepted before, is sent as the other's, flagged.
	other := os.Getppid()
	peer2, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer2.Close()
	before, err := raw.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if err := Trace(&l.ProfinferMaps, pid, false); err != nil {
		t.Fatal(err)
	}
	served, err := sockets.Read("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(Front(&l.ProfinferMaps, pid, other, true), Serving(&l.ProfinferMaps, pid, served.Ports, served.Accepted)); err != nil {
		t.Fatal(err)
	}
	defer Front(&l.ProfinferMaps, pid, other, false)
	peer2.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	if _, err := before.Read(make([]byte, 64)); err != nil { // read(2), on a connection accepted before
		t.Fatal(err)
	}
	before.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	got = got[:0]
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		rd.SetDeadline(time.Now().Add(100 * time.Millisecond))
		if err := rd.ReadInto(&rec); err != nil {
			continue
		}
		if err := events.Parse(rec.RawSample, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind == events.Received || ev.Kind == events.Replied {
			got = append(got, fmt.Sprintf("%s pid %d front %v", ev.Kind, ev.PID, ev.Flags&events.FlagFront != 0))
		}
	}
	want = []string{fmt.Sprintf("received pid %d front true", other), fmt.Sprintf("replied pid %d front true", other)}
	if !slices.Equal(got, want) {
		t.Fatalf("as a front: records %q, want %q", got, want)
	}
}

// runs says how often each program among links ran, where the kernel counts
// (kernel.bpf_stats_enabled), for a failure's message.
func runs(links Links) string {
	var out []string
	for _, l := range links {
		if p, ok := l.(*ebpf.Program); ok {
			info, err := p.Info()
			stats, serr := p.Stats()
			if err == nil && serr == nil {
				out = append(out, fmt.Sprintf("%s %d", info.Name, stats.RunCount))
			}
		}
	}
	return strings.Join(out, ", ")
}
