package vm

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Initramfs is a guest root file system, written as an uncompressed newc cpio archive:
// the format the kernel unpacks into its rootfs, and one it reads faster than a
// compressed one under emulation.
type Initramfs struct {
	entries []entry
	dirs    map[string]bool
}

type entry struct {
	name   string // without the leading slash, as cpio archives name files
	mode   uint32 // type and permission bits, as stat's st_mode
	host   string // a host file's path, read when the archive is written
	data   []byte // contents, or a symlink's target
	length int64
}

const (
	typeDir  = 0o040000
	typeFile = 0o100000
	typeLink = 0o120000
	typeMask = 0o170000
)

// File adds the host file at host as guest, with perm's permission bits.
func (r *Initramfs) File(guest, host string, perm fs.FileMode) error {
	fi, err := os.Stat(host)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("initramfs: %s is not a regular file", host)
	}
	r.add(entry{name: guest, mode: typeFile | uint32(perm.Perm()), host: host, length: fi.Size()})
	return nil
}

// Bytes adds a file at guest with contents data.
func (r *Initramfs) Bytes(guest string, data []byte, perm fs.FileMode) {
	r.add(entry{name: guest, mode: typeFile | uint32(perm.Perm()), data: data, length: int64(len(data))})
}

// Dir adds a directory.
func (r *Initramfs) Dir(guest string, perm fs.FileMode) {
	r.add(entry{name: guest, mode: typeDir | uint32(perm.Perm())})
}

// Symlink adds a symbolic link at guest to target.
func (r *Initramfs) Symlink(guest, target string) {
	r.add(entry{name: guest, mode: typeLink | 0o777, data: []byte(target), length: int64(len(target))})
}

// add appends e after any of its parent directories not yet in the archive: the kernel
// does not create them, and a file whose directory is missing is silently dropped.
func (r *Initramfs) add(e entry) {
	e.name = strings.TrimPrefix(path.Clean("/"+e.name), "/")
	if r.dirs == nil {
		r.dirs = map[string]bool{}
	}
	if dir := path.Dir(e.name); dir != "." && !r.dirs[dir] {
		r.add(entry{name: dir, mode: typeDir | 0o755})
	}
	if e.mode&typeMask == typeDir {
		if r.dirs[e.name] {
			return
		}
		r.dirs[e.name] = true
	}
	r.entries = append(r.entries, e)
}

// WriteTo writes the archive to w, reading host files as it goes.
func (r *Initramfs) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	for i, e := range r.entries {
		nlink := 1
		if e.mode&typeMask == typeDir {
			nlink = 2
		}
		if err := cw.header(e.name, i+1, e.mode, nlink, e.length); err != nil {
			return cw.n, err
		}
		if e.host != "" {
			if err := cw.copyFile(e.host, e.length); err != nil {
				return cw.n, err
			}
		} else {
			cw.Write(e.data)
		}
		cw.pad()
	}
	if err := cw.header("TRAILER!!!", 0, 0, 1, 0); err != nil {
		return cw.n, err
	}
	if cw.err != nil {
		return cw.n, cw.err
	}
	return cw.n, bw.Flush()
}

// WriteFile writes the archive to a new file at name.
func (r *Initramfs) WriteFile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := r.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// countWriter keeps the offset that newc's 4-byte alignment is computed from, and the
// first error, so that the writes above need no checks of their own.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countWriter) pad() { c.Write(make([]byte, (4-c.n%4)%4)) }

// header writes a newc header and name: 13 fields of 8 hex digits after the magic; no
// checksum, and all files owned by root, modified at the epoch.
func (c *countWriter) header(name string, ino int, mode uint32, nlink int, size int64) error {
	if size > 0xffffffff {
		return fmt.Errorf("initramfs: %s is over newc's 4 GiB", name)
	}
	fmt.Fprintf(c, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	c.Write(append([]byte(name), 0))
	c.pad()
	return c.err
}

// copyFile copies exactly size bytes of the host file: the header already gave that size.
func (c *countWriter) copyFile(name string, size int64) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(c, f, size); err != nil {
		return fmt.Errorf("initramfs: %s: %w", name, err)
	}
	return nil
}
