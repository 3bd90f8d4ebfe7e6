// Package sockets reads from /proc which of a process's file descriptors are TCP
// connections it accepted: those a server holds for its clients, as opposed to those it
// opened to others, and its files.
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

// Accepted returns the file descriptors of process pid (under procRoot, /proc) that are
// established TCP connections on a port it listens on: connections its clients made to
// it. A connection it made to a port it also listens on is counted too; a server does not.
func Accepted(procRoot string, pid int) ([]int, error) {
	proc, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	p, err := proc.Proc(pid)
	if err != nil {
		return nil, err
	}
	fds, err := p.FileDescriptors()
	if err != nil {
		return nil, fmt.Errorf("pid %d's file descriptors: %w", pid, err)
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
		return nil, err
	}
	var lines procfs.NetTCP
	for _, read := range []func() (procfs.NetTCP, error){netFS.NetTCP, netFS.NetTCP6} {
		if t, err := read(); err == nil { // no IPv6, say
			lines = append(lines, t...)
		}
	}
	ports := map[uint64]bool{}
	for _, l := range lines {
		if _, ours := inodes[l.Inode]; ours && l.St == listening {
			ports[l.LocalPort] = true
		}
	}
	var out []int
	for _, l := range lines {
		if fd, ours := inodes[l.Inode]; ours && l.St == established && ports[l.LocalPort] {
			out = append(out, fd)
		}
	}
	return out, nil
}
