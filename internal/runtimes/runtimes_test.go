package runtimes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/discover"
)

func TestOf(t *testing.T) {
	m := &discover.Module{}
	llama := []discover.Role{discover.Base, discover.CPU, discover.Llama}
	engine := []discover.Role{discover.Base, discover.CPU, discover.Llama, discover.OllamaEngine}
	for _, tc := range []struct {
		roles  []discover.Role
		exe    string
		args   []string
		parent string
		want   *Runtime
	}{
		{llama, "/usr/bin/llama-server", []string{"llama-server", "-m", "x.gguf"}, "/bin/bash", Llama},
		{llama, "/usr/bin/llama-server", nil, "/bin/bash", Llama},
		// Ollama 0.30 on: its runners, and the children that compute no model.
		{llama, "/usr/lib/ollama/llama-server", []string{"/usr/lib/ollama/llama-server", "--model", "/m/blobs/sha256-1", "--port", "1"}, "/usr/bin/ollama", Ollama},
		{llama, "/opt/x/lib/ollama/llama-server", []string{"llama-server", "--model=/m/blobs/sha256-1"}, "/sbin/init", Ollama},
		{llama, "/usr/lib/ollama/llama-server", []string{"/usr/lib/ollama/llama-server", "--port", "1", "--no-webui", "--offline", "--verbose"}, "/usr/bin/ollama", nil},
		{llama, "/usr/lib/ollama/llama-server", []string{"/usr/lib/ollama/llama-server", "--list-devices", "--offline"}, "/usr/bin/ollama", nil},
		{llama, "/usr/lib/ollama/llama-quantize", []string{"llama-quantize", "--allow-requantize", "/m/blobs/sha256-1", "/m/blobs/COPY1", "COPY"}, "/usr/bin/ollama", nil},
		{[]discover.Role{discover.Base, discover.CPU, discover.Whisper}, "/usr/bin/node", []string{"node", "w.mjs"}, "", Whisper},
		// Ollama before 0.30: one executable for its server, its runners, its discovery.
		{engine, "/usr/bin/ollama", []string{"ollama", "runner", "--ollama-engine", "--model", "/m/blobs/sha256-1", "--port", "1"}, "/usr/bin/ollama", OllamaEngine},
		{engine, "/usr/bin/ollama", []string{"ollama", "runner", "--model", "/m/blobs/sha256-1", "--port", "1"}, "/usr/bin/ollama", Ollama},
		{engine, "/usr/bin/ollama", []string{"ollama", "runner", "--ollama-engine", "--port", "1"}, "/usr/bin/ollama", nil},
		{engine, "/usr/bin/ollama", []string{"ollama", "serve"}, "/bin/bash", nil},
		{[]discover.Role{discover.Base, discover.CPU}, "/usr/bin/ggml-rpc-server", nil, "", GGML},
	} {
		p := &discover.Process{Exe: tc.exe}
		for _, r := range tc.roles {
			p.Modules[r] = m
		}
		got, idle := Of(Process{Process: p, Args: tc.args, Parent: tc.parent})
		if got != tc.want || (got == nil) != (idle != "") {
			t.Errorf("%v %s %v (parent %s): %v (%q), want %v", tc.roles, tc.exe, tc.args, tc.parent, got, idle, tc.want)
		}
	}
}

// whisper.cpp's four graphs, as the heads of their scheduler computations read them.
func TestModelArg(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"llama-server", "-m", "m.gguf", "-t", "2"}, "m.gguf"},
		{[]string{"llama-server", "--model", "/m/blobs/sha256-1"}, "/m/blobs/sha256-1"},
		{[]string{"llama-server", "--model=/x.gguf"}, "/x.gguf"},
		{[]string{"llama-server", "-m"}, ""},
		{[]string{"node", "driver.mjs", "m.gguf"}, ""},
	} {
		if got := ModelArg(tc.args); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestWhisperStages(t *testing.T) {
	embd := &assemble.NodeInfo{Op: "GET_ROWS"}
	for _, tc := range []struct {
		head assemble.Head
		want Stage
	}{
		{assemble.Head{First: &assemble.NodeInfo{Op: "IM2COL", Name: "node_0"}}, Stage{"whisper.encode", "encode", "conv"}},
		{assemble.Head{First: &assemble.NodeInfo{Op: "VIEW", Name: "leaf_4 (view)"}}, Stage{"whisper.encode", "encode", "encoder"}},
		{assemble.Head{First: &assemble.NodeInfo{Op: "CONT", Name: "embd_conv (view) (transposed) (cont)"}}, Stage{"whisper.encode", "encode", "encoder"}},
		{assemble.Head{First: &assemble.NodeInfo{Op: "MUL_MAT", Name: "node_0"}}, Stage{"whisper.encode", "encode", "cross"}},
		{assemble.Head{First: embd}, Stage{"whisper.decode", "decode", "decoder"}},
		{assemble.Head{First: &assemble.NodeInfo{Op: "PAD_REFLECT_1D", Name: "node_0"}}, Stage{schedSpan, computePhase, ""}},
	} {
		d := &assemble.Step{Kind: assemble.SchedCompute, Head: &tc.head, Tokens: 3}
		Whisper.NameStep(d)
		if got := (Stage{d.Name, d.Phase, d.Stage}); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.head.First.Op, tc.head.First.Name, got, tc.want)
		}
	}
	d := &assemble.Step{Kind: assemble.SchedCompute, Head: &assemble.Head{}, Tokens: 7}
	GGML.NameStep(d)
	if d.Name != schedSpan || d.Phase != computePhase {
		t.Errorf("a computation of no known runtime: %q, %q", d.Name, d.Phase)
	}
	OllamaEngine.NameStep(d)
	if d.Name != "ollama.forward" || d.Phase != "prefill" {
		t.Errorf("a batch of 7 tokens in Ollama's engine: %q, %q", d.Name, d.Phase)
	}
	d = &assemble.Step{Kind: assemble.LlamaDecode, Tokens: 7}
	Llama.NameStep(d)
	if d.Name != "" || d.Phase != "" {
		t.Errorf("llama_decode named %q, %q", d.Name, d.Phase)
	}
}

// Ollama names a blob by the manifest whose model layer it is.
func TestOllamaName(t *testing.T) {
	root := t.TempDir()
	models := filepath.Join(root, "home", ".ollama", "models")
	write := func(rel, body string) {
		p := filepath.Join(models, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const hex = "0123abcd"
	layer := func(media, digest string) string {
		return `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:ffff"},` +
			`{"mediaType":"` + media + `","digest":"` + digest + `","size":1}]}`
	}
	write("blobs/sha256-"+hex, "GGUF")
	write("manifests/example.org/library/other/latest", layer("application/vnd.ollama.image.model", "sha256:9999"))
	write("manifests/example.org/library/projector/latest", layer("application/vnd.ollama.image.projector", "sha256:"+hex))
	write("manifests/example.org/library/llama-1b/latest", layer("application/vnd.ollama.image.model", "sha256:"+hex))
	path := "/home/.ollama/models/blobs/sha256-" + hex
	mineLater := "/home/.ollama/models/blobs/sha256-cdcd"
	if got := OllamaName(filepath.Join(root, path), path); got != "llama-1b:latest" {
		t.Errorf("name %q, want llama-1b:latest", got)
	}
	if got := Ollama.ModelName(filepath.Join(root, path), path, "llama-1b (GGUF)"); got != "llama-1b:latest" {
		t.Errorf("Ollama's model name %q", got)
	}
	if got := Llama.ModelName(filepath.Join(root, path), path, "llama-1b (GGUF)"); got != "llama-1b (GGUF)" {
		t.Errorf("llama.cpp's model name %q", got)
	}
	// A GGUF file with no general.name is named by its file.
	if got := Llama.ModelName("/proc/1/root/m/tiny.gguf", "/m/tiny.gguf", ""); got != "tiny" {
		t.Errorf("unnamed model named %q, want its file's name", got)
	}
	if got := Ollama.ModelName(filepath.Join(root, mineLater), mineLater, ""); got != "sha256-cdcd" {
		t.Errorf("unnamed model Ollama has no manifest for, named %q", got)
	}
	write("manifests/example.org/someone/mine/q4", layer("application/vnd.ollama.image.model", "sha256:abab"))
	write("blobs/sha256-abab", "GGUF")
	mine := "/home/.ollama/models/blobs/sha256-abab"
	if got := OllamaName(filepath.Join(root, mine), mine); got != "someone/mine:q4" {
		t.Errorf("name %q, want someone/mine:q4", got)
	}
	for _, p := range []string{"/home/.ollama/models/blobs/sha256-dead", "/models/llama-1b.gguf"} {
		if got := OllamaName(filepath.Join(root, p), p); got != "" {
			t.Errorf("%s named %q", p, got)
		}
	}
}
