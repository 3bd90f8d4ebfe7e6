package discover

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
)

// ggml's backend loader names its libraries libggml-NAME.so; the base and the CPU's
// variants are not other backends, nor is a binding's own libggml.
func TestBackendLibrary(t *testing.T) {
	for path, want := range map[string]string{
		"/x/libggml-vulkan.so":           "vulkan",
		"/x/libggml-cuda.so":             "cuda",
		"/x/libggml-rpc.so.0.25.1":       "rpc",
		"/x/libggml-base.so":             "",
		"/x/libggml-cpu-haswell.so":      "",
		"/x/libggml-cpu.so":              "",
		"/x/libggml.vulkan.v0.5.0.so":    "",
		"/x/libllama.vulkan.v0.5.0.so":   "",
		"/usr/lib/libvulkan.so.1.3.239":  "",
		"/x/libggml-vulkan-extra.txt.so": "vulkan",
	} {
		if got := backendLibrary(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// The CPU backend's variant is in its library's name, where the name has one: the
// prebuilts of node-llama-cpp have one library per variant, x64 and arm64 alike.
func TestCPUVariant(t *testing.T) {
	for path, want := range map[string]string{
		"/x/libggml-cpu-haswell.so":        "haswell",
		"/x/libggml-cpu-zen4.so":           "zen4",
		"/x/libggml-cpu-x64.so":            "x64",
		"/x/libggml-cpu-sapphirerapids.so": "sapphirerapids",
		"/x/libggml-cpu-armv8.2_1.so":      "armv8.2_1",
		"/x/libggml-cpu-icelake.so.0":      "icelake",
		"/x/libggml-cpu.so":                "", // one CPU's build, no variant named
		"/x/libggml.so":                    "", // the CPU backend inside ggml's one library
		"/x/libggml-base.so":               "",
		"/usr/bin/llama-server":            "", // linked statically
		"/x/libggml-cpu-haswell.txt":       "",
		"/x/libllama-cpu-haswell.so":       "",
	} {
		if got := CPUVariant(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// The object that records llama.cpp's build is the first one mapped that defines it: the
// executable, whose copy interposes on the common library's, not a module of any role
// the probes read.
func TestInspectBuild(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "42")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	maps := `55d0c0000000-55d0c0001000 r--p 00000000 08:01 10 /opt/llama/llama-server
55d0c0001000-55d0c0002000 r-xp 00001000 08:01 10 /opt/llama/llama-server
7f0000000000-7f0000100000 r-xp 00000000 08:01 11 /opt/llama/libllama-common.so
7f0000200000-7f0000300000 r-xp 00000000 08:01 12 /opt/llama/libllama.so
7f0000400000-7f0000500000 r-xp 00000000 08:01 13 /opt/llama/libggml-base.so
7f0000600000-7f0000700000 r-xp 00000000 08:01 14 /opt/llama/libggml-cpu-zen4.so
`
	if err := os.WriteFile(filepath.Join(dir, "maps"), []byte(maps), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/opt/llama/llama-server", filepath.Join(dir, "exe")); err != nil {
		t.Fatal(err)
	}
	roles := map[uint64][]Role{10: {Build}, 11: {Build}, 12: {Llama}, 13: {Base}, 14: {CPU}}
	fs, err := procfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Inspect(fs, root, 42, func(_, inode uint64, _ func() string) ([]Role, error) { return roles[inode], nil })
	if err != nil || p == nil {
		t.Fatalf("Inspect: %v, %v", p, err)
	}
	if p.Build == nil || p.Build.Inode != 10 || p.Build.Bias != 0x55d0c0000000 {
		t.Errorf("build recorded by %+v, want the executable's, at its load address", p.Build)
	}
	for r, m := range p.Modules {
		if m != nil && (m.Inode == 10 || m.Inode == 11) {
			t.Errorf("the build's object plays role %s", Role(r))
		}
	}
	if got := CPUVariant(p.Module(CPU).Path); got != "zen4" {
		t.Errorf("CPU variant %q, want zen4", got)
	}
}
