package vm

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/profinfer/profinfer/internal/testbench"
)

// cpioEntry is one member of a newc archive as parseNewc reads it back.
type cpioEntry struct {
	mode  uint32
	nlink int
	data  string
}

// parseNewc reads a newc archive up to its trailer, checking the alignment the kernel
// relies on.
func parseNewc(t *testing.T, b []byte) (map[string]cpioEntry, []string) {
	t.Helper()
	entries, order := map[string]cpioEntry{}, []string(nil)
	field := func(h []byte, i int) int {
		v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
		require.NoError(t, err)
		return int(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for off := 0; ; {
		require.Zero(t, off%4, "entry at %d is not 4-byte aligned", off)
		h := b[off : off+110]
		require.Equal(t, "070701", string(h[:6]))
		nameLen, size := field(h, 11), field(h, 6)
		name := string(b[off+110 : off+110+nameLen-1])
		require.Zero(t, b[off+110+nameLen-1], "name not NUL-terminated")
		data := align(off + 110 + nameLen)
		if name == "TRAILER!!!" {
			return entries, order
		}
		entries[name] = cpioEntry{mode: uint32(field(h, 1)), nlink: field(h, 4), data: string(b[data : data+size])}
		order = append(order, name)
		off = align(data + size)
	}
}

func testArchive(t *testing.T) (*Initramfs, string) {
	host := filepath.Join(t.TempDir(), "tool")
	require.NoError(t, os.WriteFile(host, []byte("#!/bin/sh\necho hi\n"), 0o600))
	r := &Initramfs{}
	require.NoError(t, r.File("/usr/local/bin/tool", host, 0o755))
	r.Dir("/usr/local", 0o700) // already implied by the file above: kept as it was
	r.Bytes("etc/conf.yaml", []byte("a: 1\n"), 0o644)
	r.Symlink("/bin/sh", "busybox")
	r.Dir("/out", 0o755)
	r.Bytes("/odd", []byte("12345"), 0o600) // a length that needs padding
	return r, host
}

func TestInitramfsNewc(t *testing.T) {
	r, _ := testArchive(t)
	var buf bytes.Buffer
	n, err := r.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)

	entries, order := parseNewc(t, buf.Bytes())
	require.Equal(t, []string{"usr", "usr/local", "usr/local/bin", "usr/local/bin/tool",
		"etc", "etc/conf.yaml", "bin", "bin/sh", "out", "odd"}, order, "parents come before their contents")
	require.Equal(t, cpioEntry{mode: 0o100755, nlink: 1, data: "#!/bin/sh\necho hi\n"}, entries["usr/local/bin/tool"])
	require.Equal(t, cpioEntry{mode: 0o040755, nlink: 2}, entries["usr/local"])
	require.Equal(t, cpioEntry{mode: 0o100644, nlink: 1, data: "a: 1\n"}, entries["etc/conf.yaml"])
	require.Equal(t, cpioEntry{mode: 0o120777, nlink: 1, data: "busybox"}, entries["bin/sh"])
	require.Equal(t, cpioEntry{mode: 0o100600, nlink: 1, data: "12345"}, entries["odd"])
}

// TestInitramfsBusyboxCpio has another implementation unpack the archive.
func TestInitramfsBusyboxCpio(t *testing.T) {
	if _, err := exec.LookPath("busybox"); err != nil {
		testbench.Missing(t, "busybox (apt-get install busybox-static)")
	}
	r, _ := testArchive(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	_, err := r.WriteTo(&buf)
	require.NoError(t, err)
	cmd := exec.Command("busybox", "cpio", "-i", "-d")
	cmd.Dir, cmd.Stdin = dir, &buf
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	b, err := os.ReadFile(filepath.Join(dir, "usr/local/bin/tool"))
	require.NoError(t, err)
	require.Equal(t, "#!/bin/sh\necho hi\n", string(b))
	fi, err := os.Stat(filepath.Join(dir, "usr/local/bin/tool"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	target, err := os.Readlink(filepath.Join(dir, "bin/sh"))
	require.NoError(t, err)
	require.Equal(t, "busybox", target)
	b, err = os.ReadFile(filepath.Join(dir, "odd"))
	require.NoError(t, err)
	require.Equal(t, "12345", string(b))
}

func TestInitramfsFileErrors(t *testing.T) {
	r := &Initramfs{}
	require.Error(t, r.File("/x", filepath.Join(t.TempDir(), "missing"), 0o644))
	require.Error(t, r.File("/x", t.TempDir(), 0o644), "a directory is not a file")

	// A host file that shrank after it was added cannot fill the size its header gave.
	host := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(host, []byte("long contents"), 0o644))
	require.NoError(t, r.File("/f", host, 0o644))
	require.NoError(t, os.WriteFile(host, []byte("short"), 0o644))
	_, err := r.WriteTo(io.Discard)
	require.ErrorContains(t, err, host)
}
