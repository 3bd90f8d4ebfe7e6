// Package sockets reads from /proc the TCP ports a process listens on, and which of its
// file descriptors are connections it accepted on them: those a server holds for its
// clients, as opposed to those it opened to others, and its files.
package sockets

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// TCP states, as /proc/net/tcp writes them.
const (
	established = 0x01
	listening   = 0x0a
)

// Server is what a process serves on: the TCP ports it listens on, and the file
// descriptors of the established connections on them (its clients'; a connection it made
// to a port it also listens on among them, which a server does not make).
type Server struct {
	Ports    []int
	Accepted []int
}

// Read reads process pid's server sockets, under procRoot (/proc).
func Read(procRoot string, pid int) (Server, error) {
	var out Server
	proc, err := procfs.NewFS(procRoot)
	if err != nil {
		return out, err
	}
	p, err := proc.Proc(pid)
	if err != nil {
		return out, err
	}
	fds, err := p.FileDescriptors()
	if err != nil {
		return out, fmt.Errorf("pid %d's file descriptors: %w", pid, err)
	}
	inodes := map[uint64]int{} // socket inode to fd
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, "fd", strconv.Itoa(int(fd))))
		if err != nil {
			continue // closed meanwhile
		}
		if n, ok := strings.CutPrefix(target, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(n, "]"), 10, 64); err == nil {
				inodes[ino] = int(fd)
			}
		}
	}
	// The process's own network namespace: its /proc/<pid>/net.
	netFS, err := procfs.NewFS(dir)
	if err != nil {
		return out, err
	}
	var lines procfs.NetTCP
	for _, read := range []func() (procfs.NetTCP, error){netFS.NetTCP, netFS.NetTCP6} {
		if t, err := read(); err == nil { // no IPv6, say
			lines = append(lines, t...)
		}
	}
	ports := map[uint64]bool{}
	for _, l := range lines {
		if _, ours := inodes[l.Inode]; ours && l.St == listening && !ports[l.LocalPort] {
			ports[l.LocalPort] = true
			out.Ports = append(out.Ports, int(l.LocalPort))
		}
	}
	for _, l := range lines {
		if fd, ours := inodes[l.Inode]; ours && l.St == established && ports[l.LocalPort] {
			out.Accepted = append(out.Accepted, fd)
		}
	}
	return out, nil
}
