package backends

import "testing"

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
