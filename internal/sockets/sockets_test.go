package sockets

import (
	"net"
	"os"
	"slices"
	"testing"
)

// fdOf is the file descriptor of c, a TCP connection.
func fdOf(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// This process listens, dials a port of its own and one of another's (a listener it
// closes, its connection still open), and accepts: it listens on the port, the accepted
// connection is one, the connection to a port it no longer listens on is not, nor is the
// listener or a file.
func TestRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out, err := net.Dial("tcp", other.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	theirs, err := other.Accept()
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	theirs.Close()
	in, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	srv, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Accepted
	if port := ln.Addr().(*net.TCPAddr).Port; !slices.Contains(srv.Ports, port) {
		t.Errorf("listening on %v, want %d among them", srv.Ports, port)
	}
	// The dialed end of ours is on another port (its ephemeral one): not accepted.
	if want := fdOf(t, accepted); !slices.Contains(got, want) || slices.Contains(got, fdOf(t, in)) || slices.Contains(got, fdOf(t, out)) {
		t.Errorf("accepted fds %v, want %d alone of ours (dialed %d and %d)", got, want, fdOf(t, in), fdOf(t, out))
	}
	if _, err := Read("/proc", 1<<30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
