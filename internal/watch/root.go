package watch

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
)

// maxLinks is as many symbolic links as a lookup follows, as the kernel's (40).
const maxLinks = 40

// within resolves name as the processes whose root is root see it: each symbolic link
// along it is read and followed inside root. The kernel follows an absolute link
// relative to the caller's root, not to the /proc/PID/root it came through, so a
// Debian host's /lib64/ld-linux-x86-64.so.2 (a link to /lib/x86_64-linux-gnu/...) is not
// found under /proc/1/root from a container built from scratch.
func within(root, name string) (string, error) {
	resolved, rest, links := "/", parts(name), 0
	for len(rest) > 0 {
		next := path.Join(resolved, rest[0])
		rest = rest[1:]
		fi, err := os.Lstat(path.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many levels of symbolic links", name)
		}
		target, err := os.Readlink(path.Join(root, next))
		if err != nil {
			return "", err
		}
		if target == "" {
			return "", errors.New(name + ": an empty symbolic link")
		}
		if !path.IsAbs(target) {
			target = path.Join(resolved, target)
		}
		rest = append(parts(target), rest...)
		resolved = "/"
	}
	return path.Join(root, resolved), nil
}

// parts are the names along p, from the root.
func parts(p string) []string {
	if p = strings.Trim(path.Clean("/"+p), "/"); p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
