// Package container names the container a process runs in, from its cgroup: the id the
// runtime gave it, as the OpenTelemetry container.id convention and the k8s_attributes
// processor's pod association by container.id expect it.
package container

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// prefixes are what the runtimes put before a container's id in a cgroup path's last
// components: Docker's systemd driver (docker-ID.scope), containerd's CRI plugin
// (cri-containerd-ID.scope), CRI-O (crio-ID.scope) and podman (libpod-ID.scope); the
// cgroupfs drivers use the bare id (/docker/ID, /kubepods/…/podUID/ID).
var prefixes = []string{"docker-", "cri-containerd-", "crio-", "libpod-", ""}

// ID returns the container id in the cgroup file r (/proc/PID/cgroup), or "" for a
// process in no container. Version 1 and 2 hierarchies are read alike: the id is the last
// path component (before podman's /container leaf) that is, after a runtime's prefix and
// a .scope suffix, 64 hex digits. The runtimes' monitors (conmon: libpod-conmon-ID,
// crio-conmon-ID) are not containers.
func ID(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		_, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id := inPath(path); id != "" {
			return id
		}
	}
	return ""
}

// Of returns the container id of process pid under the procfs mounted at root.
func Of(root string, pid int) string {
	f, err := os.Open(filepath.Join(root, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return ""
	}
	defer f.Close()
	return ID(f)
}

func inPath(path string) string {
	parts := strings.Split(path, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		p := strings.TrimSuffix(parts[i], ".scope")
		if strings.Contains(p, "conmon") {
			return ""
		}
		for _, pre := range prefixes {
			if id, ok := strings.CutPrefix(p, pre); ok && isID(id) {
				return id
			}
		}
	}
	return ""
}

func isID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
