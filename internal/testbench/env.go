// Package testbench locates the test bench that `make testenv` builds under .testenv/ and
// drives the real engines in it: llama-bench, llama-server, ggml-rpc-server and the
// node-llama-cpp prebuilt. Every driver waits until its work is done and leaves no process
// behind.
package testbench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Env is a built test bench.
type Env struct {
	Root string // the .testenv directory
}

// Find locates the test bench: $PROFINFER_TESTENV, or .testenv in the root of this module
// above the working directory.
func Find() (*Env, error) {
	if dir := os.Getenv("PROFINFER_TESTENV"); dir != "" {
		return check(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(string(mod), "module github.com/profinfer/profinfer\n") {
			return check(filepath.Join(dir, ".testenv"))
		}
		if filepath.Dir(dir) == dir {
			return nil, errors.New("testbench: no profinfer module root above " + wd)
		}
	}
}

func check(dir string) (*Env, error) {
	e := &Env{Root: dir}
	for _, p := range []string{e.Bin("llama-bench"), e.StaticServer(), e.Model("tiny-dense")} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("testbench: %s is missing; run `make testenv`", p)
		}
	}
	return e, nil
}

// Bin is the path of a llama.cpp tool built by the test bench.
func (e *Env) Bin(name string) string { return filepath.Join(e.Root, "llama.cpp", "bin", name) }

// StaticServer is a llama-server built with BUILD_SHARED_LIBS=OFF: GGML and llama are
// inside the executable. It is the portable one, libc included.
func (e *Env) StaticServer() string { return e.Portable("llama-server") }

// Portable is a llama.cpp tool built for the VM guests of internal/vm: static, libc
// included, and for any x86-64 CPU with AVX2 rather than this machine's.
func (e *Env) Portable(name string) string {
	return filepath.Join(e.Root, "llama.cpp", "portable", name)
}

// PortableARM64 is the same tool cross-built for the arm64 guests, for any ARMv8-A CPU.
func (e *Env) PortableARM64(name string) string {
	return filepath.Join(e.Root, "llama.cpp", "portable-arm64", name)
}

// Model is the path of a test bench model, by name without extension.
func (e *Env) Model(name string) string { return filepath.Join(e.Root, "models", name+".gguf") }

// ShaderCache is where lavapipe keeps the shaders it compiled (MESA_SHADER_CACHE_DIR):
// in the machine's cache of the test bench, scripts/testenv.sh's, so that a new clone's
// Vulkan tests find them (TestE2EVulkanOffload ran 51.7 s without them, 17.3 s with).
// Mesa keys each entry by its own build and the shader: another driver's are misses.
func (e *Env) ShaderCache() string {
	dir := os.Getenv("PROFINFER_CACHE")
	if c, err := os.UserCacheDir(); dir == "" && err == nil {
		dir = filepath.Join(c, "profinfer-testbench")
	}
	if dir == "" || os.MkdirAll(dir, 0o755) != nil {
		dir = e.Root
	}
	return filepath.Join(dir, "mesa-shader-cache")
}

// NodeDriver is the node-llama-cpp workload script.
func (e *Env) NodeDriver() string { return filepath.Join(e.Root, "npm", "driver.mjs") }

// OldNodeDriver is the node-llama-cpp workload script of an older release's prebuilt,
// installed by testenv.sh beside the current one.
func (e *Env) OldNodeDriver(version string) string {
	return filepath.Join(e.Root, "npm-"+version, "driver.mjs")
}

// OldStatic is the static llama-bench (OpenMP) that make testenv builds of an older
// llama.cpp release, such as b3889.
func (e *Env) OldStatic(release string) string {
	return filepath.Join(e.Root, "llama.cpp-"+release, "static", "llama-bench")
}

// PrebuiltBins is where an npm install keeps node-llama-cpp's x64 prebuilt libraries.
var PrebuiltBins = filepath.Join("node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")

// PrebuiltDir holds the node-llama-cpp x64 prebuilt libraries.
func (e *Env) PrebuiltDir() string { return filepath.Join(e.Root, "npm", PrebuiltBins) }

// ARM64PrebuiltDir holds node-llama-cpp's arm64 prebuilt libraries, whose code the
// arm64 probe placement and layout detection are checked on.
func (e *Env) ARM64PrebuiltDir() string {
	return filepath.Join(e.Root, "npm", "node_modules", "@node-llama-cpp", "linux-arm64", "bins", "linux-arm64")
}

// OldPrebuiltDir holds the x64 prebuilt libraries of an older node-llama-cpp version.
func (e *Env) OldPrebuiltDir(version string) string {
	return filepath.Join(e.Root, "npm-"+version, PrebuiltBins)
}

// Require returns the test bench, or ends the test: skipped on a developer machine,
// failed in CI (CI=true), where a missing test bench is a broken build, not a reason to skip.
func Require(t testing.TB) *Env {
	t.Helper()
	e, err := Find()
	if err != nil {
		Missing(t, err.Error())
	}
	return e
}

// Missing ends a test whose prerequisite is absent: fatal in CI, a skip elsewhere.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing in CI: %s", why)
	}
	t.Skipf("prerequisite missing: %s", why)
}
