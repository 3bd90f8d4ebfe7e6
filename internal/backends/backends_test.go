package backends

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/profinfer/profinfer/internal/symbols"
)

func TestName(t *testing.T) {
	for sym, want := range map[string]string{
		"_ZL25ggml_backend_cpu_get_nameP12ggml_backend":               "CPU",
		"_ZL21ggml_backend_rpc_nameP12ggml_backend":                   "RPC",
		"ggml_backend_cpu_buffer_get_base":                            "CPU",
		"_ZL32ggml_backend_rpc_buffer_get_baseP19ggml_backend_buffer": "RPC",
		"ggml_backend_cuda_get_name":                                  "CUDA",
		"ggml_graph_compute":                                          "",
		"_ZN10rpc_server13graph_computeERKSt6vectorIhSaIhEE":          "",
	} {
		if got := Name(sym); got != want {
			t.Errorf("Name(%s) = %q, want %q", sym, got, want)
		}
	}
}

// The executable is read only when an address lands in it: a binding's (node's) is large
// and holds no backend. This test binary maps no GGML object, only itself.
func TestResolverReadsExecutableOnDemand(t *testing.T) {
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var opened []string
	open := func(path string, dev, inode uint64) (*symbols.File, error) {
		opened = append(opened, path)
		return symbols.Open(path)
	}
	r := NewResolver(fs, "/proc", os.Getpid(), open)
	if len(opened) != 0 {
		t.Fatalf("opened %v before any address needed them", opened)
	}
	if got := r.Name(uint64(reflect.ValueOf(TestName).Pointer())); got != Unknown {
		t.Errorf("a test function names backend %q, want %q", got, Unknown)
	}
	if len(opened) != 1 {
		t.Errorf("opened %v for an address in the executable, want it alone", opened)
	}
}

// lavapipe is known by its threads, read from /proc or by the names they take.
func TestSoftware(t *testing.T) {
	root := t.TempDir()
	thread := func(pid, tid, comm string) {
		dir := filepath.Join(root, pid, "task", tid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	thread("10", "10", "node")
	thread("10", "11", "llvmpipe-0")
	thread("20", "20", "llama-server")
	thread("20", "21", "llama-server")
	for _, c := range []struct {
		pid int
		sw  string
	}{{10, "lavapipe"}, {20, ""}, {30, ""}} {
		if got := Software(root, c.pid); got != c.sw {
			t.Errorf("Software(pid %d) = %q, want %q", c.pid, got, c.sw)
		}
	}
	for name, sw := range map[string]string{"llvmpipe-3": "lavapipe", "llvmpipe": "", "llama-server": "", "": ""} {
		if got := SoftwareThread(name); got != sw {
			t.Errorf("SoftwareThread(%q) = %q, want %q", name, got, sw)
		}
	}
}
