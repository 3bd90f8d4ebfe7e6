//go:build e2e

package vm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/profinfer/profinfer/internal/testbench"
)

// TestE2EBoot boots every kernel of the matrix and runs the portable llama-bench in it:
// the guest is the kernel that was asked for, has BTF, and runs llama.cpp.
func TestE2EBoot(t *testing.T) {
	env, kernels := Require(t, "amd64")
	bench := env.Portable("llama-bench")
	if _, err := os.Stat(bench); err != nil {
		testbench.Missing(t, bench+"; run `make testenv`")
	}
	for _, k := range kernels {
		t.Run(k.Name, func(t *testing.T) {
			files := &Initramfs{}
			require.NoError(t, files.File("/bin/llama-bench", bench, 0o755))
			require.NoError(t, files.File("/models/tiny-dense.gguf", env.Model("tiny-dense"), 0o644))
			r := boot(t, &Guest{Kernel: k, Script: `
uname -r >/out/release
test -e /sys/kernel/btf/vmlinux && echo yes >/out/btf
llama-bench -m /models/tiny-dense.gguf -p 0 -n 4 -r 1 -t 2 >/out/bench.md
`, Files: files})
			read := func(name string) string {
				b, err := os.ReadFile(filepath.Join(r.Out, name))
				require.NoError(t, err, "%s", r.Output)
				return string(b)
			}
			require.Equal(t, k.Release, strings.TrimSpace(read("release")))
			require.Equal(t, "yes\n", read("btf"), "no /sys/kernel/btf/vmlinux")
			table := read("bench.md")
			require.Contains(t, table, "| model", "llama-bench's table:\n%s", r.Output)
			require.Contains(t, table, "tg4", "llama-bench's table:\n%s", r.Output)
			t.Logf("llama-bench in %s:\n%s", k.Release, table)
		})
	}
}

// TestE2EBootARM64 boots the arm64 kernels on qemu's virt machine: the guest is the kernel
// that was asked for, on an arm64 CPU, has BTF, and the results come back over the
// console it shares with the kernel.
func TestE2EBootARM64(t *testing.T) {
	_, kernels := Require(t, "arm64")
	for _, k := range kernels {
		t.Run(k.Name, func(t *testing.T) {
			r := boot(t, &Guest{Kernel: k, Script: `
uname -rm >/out/release
test -e /sys/kernel/btf/vmlinux && echo yes >/out/btf
`})
			b, err := os.ReadFile(filepath.Join(r.Out, "release"))
			require.NoError(t, err, "%s", r.Output)
			require.Equal(t, k.Release+" aarch64", strings.TrimSpace(string(b)))
			b, err = os.ReadFile(filepath.Join(r.Out, "btf"))
			require.NoError(t, err, "no /sys/kernel/btf/vmlinux: %s", r.Output)
			require.Contains(t, r.Console, "Booting Linux on physical CPU", "the console holds the kernel's messages")
			require.NotContains(t, r.Console, beginMarker, "the results are cut from the console")
		})
	}
}

// boot runs g, ending the test unless its script ran and exited 0.
func boot(t *testing.T, g *Guest) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	r, err := g.Run(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: init at %v of guest uptime, %v from qemu's start to its exit", g.Kernel.Release, r.InitAt, r.Wall)
	if r.Status != 0 {
		t.Fatalf("script exited %d:\n%s\nconsole:\n%s", r.Status, r.Output, tail(r.Console))
	}
	return r
}
