// Package runtimes knows the GGML runtimes by their application layer: what each calls a
// unit of work, and how it is named. Graphs, nodes, splits, copies, devices, threads and
// the CPU share are the same for every runtime, and are none of this package's business.
// A process's runtime is chosen by the symbols it has; adding a runtime is adding a room
// here (a file) and a row to the table in Of.
package runtimes

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/schema"
)

// Runtime is the application layer of one GGML runtime.
type Runtime struct {
	// Name is the runtime as the ggml.runtime resource attribute and the views name it.
	Name string
	// Steps says that its unit of work is a backend scheduler's computation of a graph
	// (ggml_backend_sched_graph_compute_async), probed as a step and named by Stage; a
	// runtime without (llama.cpp) has its own unit, llama_decode.
	Steps bool
	// GGUF says that its model is a GGUF file the process maps or holds open.
	GGUF bool
	// stage names its steps; nil: a computation of no known runtime.
	stage func(h *assemble.Head, tokens int) Stage
	// modelName names the model file at host (path as the process sees it) as the runtime
	// does, ""  where it gives no name of its own; nil: the file's own name is used.
	modelName func(host, path string) string
}

// ModelName is the name of the model file at host (path as the process sees it), whose
// own name is name (general.name): the runtime's, where it names its models itself
// (Ollama), else its own, else the file's (its base name, less .gguf).
func (r *Runtime) ModelName(host, path, name string) string {
	if r.modelName != nil {
		if n := r.modelName(host, path); n != "" {
			return n
		}
	}
	if name == "" && path != "" {
		name = strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	return name
}

// Stage is what a runtime calls one of its steps: the step's span name, the phase its
// graphs are folded into, and which of the runtime's graphs it is, if it has several.
type Stage struct {
	Span, Phase, Graph string
}

// NameStep names step d as its runtime does.
func (r *Runtime) NameStep(d *assemble.Step) {
	if d.Kind != assemble.SchedCompute {
		return
	}
	st := Stage{Span: schedSpan, Phase: computePhase}
	if r.stage != nil && d.Head != nil {
		st = r.stage(d.Head, d.Tokens)
	}
	d.Name, d.Phase, d.Stage = st.Span, st.Phase, st.Graph
}

// schedSpan and computePhase name a computation of no known runtime.
const (
	schedSpan    = schema.SpanSchedCompute
	computePhase = "compute"
)

// Process is what Of looks at: the process as discovery found it, its arguments, and the
// executable and pid of the process that started it.
type Process struct {
	*discover.Process
	Args      []string
	Parent    string
	ParentPID int
}

// The runtimes, by what chooses them.
var (
	// Llama is llama.cpp itself, and any program linking libllama: llama-server,
	// llama-cli, llama-bench, node-llama-cpp, bindings.
	Llama = &Runtime{Name: "llama.cpp", GGUF: true}
	// Whisper is whisper.cpp: transcriptions of encoder and decoder passes.
	Whisper = &Runtime{Name: "whisper.cpp", Steps: true, stage: whisperStage}
	// Ollama is Ollama's llama-server children (Ollama 0.30 on), named as Ollama names
	// their models.
	Ollama = &Runtime{Name: "ollama", GGUF: true, modelName: OllamaName}
	// OllamaEngine is Ollama's own Go engine (before 0.30), whose unit is a forward batch.
	OllamaEngine = &Runtime{Name: "ollama", Steps: true, GGUF: true, stage: ollamaStage, modelName: OllamaName}
	// GGML is any other program that computes GGML graphs: its graphs and nodes are
	// profiled, each scheduler's computation a step.
	GGML = &Runtime{Name: "ggml", Steps: true}
)

// Of chooses process p's runtime by the symbols it has, or says why it is not profiled
// though it maps GGML: a process of a runtime that computes no model (Ollama's server,
// its device discovery, its model import). Such a process is looked at and let be.
func Of(p Process) (rt *Runtime, idle string) {
	switch {
	case p.Module(discover.Whisper) != nil:
		return Whisper, ""
	case p.Module(discover.OllamaEngine) != nil: // Ollama before 0.30: one executable for all
		if idle := ollamaIdle(p); idle != "" {
			return nil, idle
		}
		if slices.Contains(p.Args, "--ollama-engine") {
			return OllamaEngine, ""
		}
		return Ollama, "" // its llama.cpp runner
	case p.Module(discover.Llama) != nil && ollamaChild(p):
		if idle := ollamaIdle(p); idle != "" {
			return nil, idle
		}
		return Ollama, ""
	case p.Module(discover.Llama) != nil:
		return Llama, ""
	}
	return GGML, ""
}

// ModelArg is the model file a process names on its command line (llama.cpp's and
// Ollama's -m or --model), "" where it names none: a model read without mmap is neither
// mapped nor held open once loaded.
func ModelArg(args []string) string {
	for i, a := range args {
		switch {
		case (a == "-m" || a == "--model") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--model="):
			return strings.TrimPrefix(a, "--model=")
		}
	}
	return ""
}
