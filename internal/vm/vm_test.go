package vm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/profinfer/profinfer/internal/testbench"
)

func TestKernels(t *testing.T) {
	root := t.TempDir()
	for name, release := range map[string]string{"6.12": "6.12.111+deb12-amd64", "5.10": "5.10.0-32-amd64", "6.1": "6.1.0-50-amd64\n"} {
		dir := filepath.Join(root, "kernels", name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), []byte(release), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "kernels/6.1/vmlinux"), nil, 0o644))
	// Interrupted while downloading: no release yet.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "kernels", "6.6"), 0o755))
	// arm64's kernels beside their busybox.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "kernels-arm64", "6.1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "kernels-arm64/6.1/release"), []byte("6.1.0-50-arm64\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "kernels-arm64/busybox"), nil, 0o755))

	ks, err := Kernels(&testbench.Env{Root: root}, "amd64")
	require.NoError(t, err)
	require.Equal(t, []Kernel{
		{Arch: "amd64", Name: "5.10", Vmlinuz: filepath.Join(root, "kernels/5.10/vmlinuz"), Release: "5.10.0-32-amd64", Busybox: Busybox},
		{Arch: "amd64", Name: "6.1", Vmlinuz: filepath.Join(root, "kernels/6.1/vmlinuz"), Vmlinux: filepath.Join(root, "kernels/6.1/vmlinux"), Release: "6.1.0-50-amd64", Busybox: Busybox},
		{Arch: "amd64", Name: "6.12", Vmlinuz: filepath.Join(root, "kernels/6.12/vmlinuz"), Release: "6.12.111+deb12-amd64", Busybox: Busybox},
	}, ks)
	ks, err = Kernels(&testbench.Env{Root: root}, "arm64")
	require.NoError(t, err)
	require.Equal(t, []Kernel{
		{Arch: "arm64", Name: "6.1", Vmlinuz: filepath.Join(root, "kernels-arm64/6.1/vmlinuz"), Release: "6.1.0-50-arm64", Busybox: filepath.Join(root, "kernels-arm64/busybox")},
	}, ks)

	ks, err = Kernels(&testbench.Env{Root: t.TempDir()}, "amd64")
	require.NoError(t, err)
	require.Empty(t, ks)
	_, err = Kernels(&testbench.Env{Root: root}, "riscv64")
	require.EqualError(t, err, "vm: no machine for riscv64")
}

// serialResults is what init writes to ttyS1, with the carriage returns and noise a
// serial line may add around it.
func serialResults(t *testing.T, files map[string]string) string {
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	for _, d := range []string{"out/", "out/sub/", "run/vm/"} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}))
	}
	for name, data := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}))
		_, err := tw.Write([]byte(data))
		require.NoError(t, err)
	}
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}))
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	enc := base64.StdEncoding.EncodeToString(tgz.Bytes())
	var lines []string
	for len(enc) > 76 {
		lines, enc = append(lines, enc[:76]), enc[76:]
	}
	lines = append(lines, enc)
	return "noise\r\n" + beginMarker + "\r\n" + strings.Join(lines, "\r\n") + "\r\n" + endMarker + "\r\n"
}

func TestUnpack(t *testing.T) {
	dir := t.TempDir()
	serial := filepath.Join(dir, "results.txt")
	require.NoError(t, os.WriteFile(serial, []byte(serialResults(t, map[string]string{
		"out/release":      "6.1.0-50-amd64\n",
		"out/sub/bench.md": "| model |\n",
		"run/vm/output":    "hello\n",
		"run/vm/status":    "3\n",
		"run/vm/uptime":    "4.52\n",
	})), 0o644))

	r := &Result{Out: filepath.Join(dir, "out")}
	require.NoError(t, r.unpack(serial))
	require.Equal(t, "hello\n", r.Output)
	require.Equal(t, 3, r.Status)
	require.Equal(t, 4520*time.Millisecond, r.InitAt)
	b, err := os.ReadFile(filepath.Join(r.Out, "release"))
	require.NoError(t, err)
	require.Equal(t, "6.1.0-50-amd64\n", string(b))
	b, err = os.ReadFile(filepath.Join(r.Out, "sub", "bench.md"))
	require.NoError(t, err)
	require.Equal(t, "| model |\n", string(b))
	require.NoFileExists(t, filepath.Join(dir, "escape"))

	require.NoError(t, os.WriteFile(serial, []byte("Kernel panic - not syncing\n"), 0o644))
	require.ErrorContains(t, (&Result{Out: filepath.Join(dir, "out2")}).unpack(serial), "markers")
}
