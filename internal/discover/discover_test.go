package discover

import "testing"

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
