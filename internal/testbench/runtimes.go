package testbench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The GGML runtimes beside llama.cpp itself that the test bench holds: whisper.cpp's and
// llama.cpp's Node addons (@fugood/whisper.node, @fugood/llama.node), GGML linked into
// one index.node each, with their workload drivers.

// FugoodDir holds the addons and their drivers.
func (e *Env) FugoodDir() string { return filepath.Join(e.Root, "npm-fugood") }

// WhisperModel is the path of a test bench whisper model (whisper-micro, whisper-tiny),
// in whisper's legacy ggml format; Speech is the recording they transcribe: 3 s, 16 kHz.
func (e *Env) WhisperModel(name string) string { return filepath.Join(e.Root, "models", name+".bin") }
func (e *Env) Speech() string                  { return filepath.Join(e.Root, "models", "speech-3s.wav") }

// RequireFugood ends the test unless the addons are installed.
func (e *Env) RequireFugood(t testing.TB) {
	t.Helper()
	for _, p := range []string{filepath.Join(e.FugoodDir(), "whisper-driver.mjs"), e.WhisperModel("whisper-micro"), e.Speech()} {
		if _, err := os.Stat(p); err != nil {
			Missing(t, err.Error()+"; run `make testenv`")
		}
	}
}

// Whisper is a run of the whisper.cpp addon's driver: Runs transcriptions of the
// recording with Model, on the CPU addon or, with Vulkan, the Vulkan one on lavapipe.
type Whisper struct {
	Model         string
	Runs, Threads int
	Vulkan        bool
	// Gate, if set, is a file the driver waits for, its model loaded, before it
	// transcribes: as a service waits for its first request.
	Gate string
}

// Command returns the command that runs w with node: through env, which execs node with
// the driver's settings, so that node is the process profiled. Each recording is decoded
// once (no temperature fallback): random weights never satisfy its thresholds.
func (w Whisper) Command(e *Env, node string) (string, []string) {
	args := []string{"TEMPERATURE_INC=0"}
	if w.Gate != "" {
		args = append(args, "WAIT_FILE="+w.Gate)
	}
	if w.Vulkan {
		args = append(args, "GPU=vulkan", "GGML_VK_VISIBLE_DEVICES=0", "MESA_SHADER_CACHE_DIR="+e.ShaderCache())
	}
	return "env", append(args, node, filepath.Join(e.FugoodDir(), "whisper-driver.mjs"), e.WhisperModel(w.Model), e.Speech(),
		strconv.Itoa(max(w.Threads, 1)), strconv.Itoa(max(w.Runs, 1)))
}

// WhisperResult is what the whisper driver prints.
type WhisperResult struct {
	PID          int     `json:"pid"`
	Seconds      float64 `json:"seconds"`
	AudioSeconds float64 `json:"audioSeconds"`
	GPU          any     `json:"gpu"`
	Segments     int     `json:"segments"`
}

// LlamaNodeArgs are the llama.node driver's arguments for a completion of maxTokens with
// model, repeated.
func (e *Env) LlamaNodeArgs(model string, maxTokens, threads, repeat int) []string {
	return []string{filepath.Join(e.FugoodDir(), "llama-node-driver.mjs"), e.Model(model), strconv.Itoa(maxTokens),
		strconv.Itoa(threads), strconv.Itoa(repeat)}
}

// LlamaNodeResult is what the llama.node driver prints: the engine's own timings too.
type LlamaNodeResult struct {
	PID     int     `json:"pid"`
	Tokens  int     `json:"tokens"`
	Seconds float64 `json:"seconds"`
	Timings struct {
		PromptN     int     `json:"prompt_n"`
		PromptMS    float64 `json:"prompt_ms"`
		PredictedN  int     `json:"predicted_n"`
		PredictedMS float64 `json:"predicted_ms"`
	} `json:"timings"`
}

// ParseLast decodes the last line of a driver's output as JSON into v: the addons print
// their own lines on stdout before it.
func ParseLast(out []byte, v any) error {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], v); err != nil {
		return fmt.Errorf("driver output %q: %w", tail(out), err)
	}
	return nil
}
