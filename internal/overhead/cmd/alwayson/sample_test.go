package main

import "testing"

func TestCountPath(t *testing.T) {
	out := []byte(`	ffffffff81234567 finish_task_switch
	ffffffff81234568 schedule
	            1234 ggml_graph_compute_thread

	ffffffff81000001 bpf_prog_123_graph_exit
	ffffffff81000002 uprobe_notify_resume
	ffffffff81000003 asm_exc_int3
	            5678 ggml_backend_graph_compute

	ffffffff81000004 __x64_sys_uretprobe
	ffffffff81000005 do_syscall_64
	            9abc llama_decode
`)
	if samples, inPath := countPath(out); samples != 3 || inPath != 2 {
		t.Fatalf("%d samples, %d in the uprobe path; want 3 and 2", samples, inPath)
	}
}
