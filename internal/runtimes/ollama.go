package runtimes

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/schema"
)

// Ollama runs GGUF models two ways. From 0.30 on it starts upstream llama-server as a
// child of `ollama serve`, from its lib/ollama directory, one per loaded model: llama.cpp's
// application layer, with the model named as Ollama names it. Before, its own Go engine
// computed the model through cgo in an `ollama runner` child, a forward batch at a time:
// one scheduler computation a batch, whose first node gets the batch's token embeddings.

// ollamaChild says whether p is a program Ollama started from its lib/ollama directory
// (llama-server, llama-quantize): its parent runs ollama, or it runs from there.
func ollamaChild(p Process) bool {
	return filepath.Base(p.Parent) == "ollama" || strings.Contains(p.Exe, "/lib/ollama/")
}

// Front is the process that takes the requests p computes from their clients and hands
// them to p, 0 where p takes its own: ollama serve, for its runners. ollama serve holds a
// request until its runner has a slot (OLLAMA_NUM_PARALLEL): the runner sees it only then.
func Front(p Process) int {
	if filepath.Base(p.Parent) == "ollama" {
		return p.ParentPID
	}
	return 0
}

// ollamaIdle says why a process of Ollama's that maps GGML computes no model: "" for its
// runners, which name their model (--model). The others are looked at and let be: the
// server itself (before 0.30 GGML is in its executable), the device discovery it runs at
// start (llama-server without a model, llama-server --list-devices, an `ollama runner`
// without a model), and the llama-quantize that checks an imported GGUF.
func ollamaIdle(p Process) string {
	if ModelArg(p.Args) != "" {
		return ""
	}
	return "a process of Ollama's that computes no model (its server, device discovery or model import)"
}

func ollamaStage(_ *assemble.Head, tokens int) Stage {
	switch {
	case tokens > 1:
		return Stage{Span: schema.SpanOllamaForward, Phase: "prefill"}
	case tokens == 1:
		return Stage{Span: schema.SpanOllamaForward, Phase: "decode"}
	}
	return Stage{Span: schema.SpanOllamaForward, Phase: computePhase}
}

// OllamaName returns the name Ollama gives the model whose blob is at host (as profinfer
// reaches it; path is as the process sees it), from the manifests beside the blobs:
// models/blobs/sha256-HEX is named by the manifest at models/manifests/HOST/NAMESPACE/
// MODEL/TAG whose model layer has digest sha256:HEX. It is MODEL:TAG, or NAMESPACE/MODEL:TAG
// outside Ollama's own library; "" where no manifest names it. The registry host is left
// out.
func OllamaName(host, path string) string {
	base := filepath.Base(path)
	hex, ok := strings.CutPrefix(base, "sha256-")
	if !ok || filepath.Base(filepath.Dir(path)) != "blobs" {
		return ""
	}
	// host ends in the same path as the process sees it: the models directory is two up.
	manifests := filepath.Join(filepath.Dir(filepath.Dir(host)), "manifests")
	digest := "sha256:" + hex
	name := ""
	_ = filepath.WalkDir(manifests, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || name != "" {
			return nil
		}
		rel, err := filepath.Rel(manifests, p)
		parts := strings.Split(rel, string(filepath.Separator))
		if err != nil || len(parts) != 4 || !hasModelLayer(p, digest) {
			return nil
		}
		ns, m, tag := parts[1], parts[2], parts[3]
		name = m + ":" + tag
		if ns != "library" {
			name = ns + "/" + name
		}
		return fs.SkipAll
	})
	return name
}

// maxManifest bounds a manifest read: a few hundred bytes a layer.
const maxManifest = 1 << 20

// hasModelLayer says whether the manifest at p has a model layer of digest.
func hasModelLayer(p, digest string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"layers"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxManifest)).Decode(&m); err != nil {
		return false
	}
	for _, l := range m.Layers {
		if l.Digest == digest && l.MediaType == "application/vnd.ollama.image.model" {
			return true
		}
	}
	return false
}
