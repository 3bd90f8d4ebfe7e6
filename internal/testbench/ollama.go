package testbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Ollama is a running `ollama serve` of the test bench's builds: Ollama as it ships (its
// lib/ollama/llama-server children), or a release before 0.30 on its own Go engine.
type Ollama struct {
	*Process
	Exe, URL, Models string
}

// OllamaExe is the test bench's build of Ollama as it ships, with its lib/ollama beside;
// OllamaOldExe the release before 0.30, which runs its own engine.
func (e *Env) OllamaExe() string    { return filepath.Join(e.Root, "ollama", "bin", "ollama") }
func (e *Env) OllamaOldExe() string { return filepath.Join(e.Root, "ollama-old", "ollama") }

// RequireOllama ends the test unless exe, one of the test bench's Ollama builds, is there.
func RequireOllama(t testing.TB, exe string) {
	t.Helper()
	if _, err := os.Stat(exe); err != nil {
		Missing(t, err.Error()+"; run `make testenv`")
	}
}

// StartOllama starts exe serve on a free port, its models under models, with env added
// to its environment (OLLAMA_NEW_ENGINE=1, OLLAMA_KEEP_ALIVE=…), and waits until it
// serves. It never reaches beyond the machine.
func StartOllama(ctx context.Context, exe, models string, env ...string) (*Ollama, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(exe, "serve")
	cmd.Env = append(os.Environ(), append([]string{"OLLAMA_HOST=" + host, "OLLAMA_MODELS=" + models, "OLLAMA_NO_CLOUD=1"}, env...)...)
	p, err := startCmd(cmd)
	if err != nil {
		return nil, err
	}
	o := &Ollama{Process: p, Exe: exe, URL: "http://" + host, Models: models}
	for {
		if resp, err := http.Get(o.URL + "/api/version"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return o, nil
			}
		}
		if p.Exited() || ctx.Err() != nil {
			o.Stop()
			return nil, fmt.Errorf("ollama serve did not serve: %v; stderr: %s", ctx.Err(), tail(p.Stderr.Bytes()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Create imports the GGUF file at gguf as model name, with a Modelfile.
func (o *Ollama) Create(ctx context.Context, name, gguf string) error {
	dir, err := os.MkdirTemp("", "profinfer-modelfile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	mf := filepath.Join(dir, "Modelfile")
	if err := os.WriteFile(mf, []byte("FROM "+gguf+"\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, o.Exe, "create", name, "-f", mf)
	cmd.Env = append(os.Environ(), "OLLAMA_HOST="+o.URL[len("http://"):])
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ollama create %s: %w: %s", name, err, tail(out))
	}
	return nil
}

// OllamaTimings are what Ollama answers of a generation: the tokens of the prompt (the
// cached ones among them) and its evaluation's time, the tokens generated and their time,
// as its runner reported them, in ns.
type OllamaTimings struct {
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalCount          int   `json:"eval_count"`
	EvalDuration       int64 `json:"eval_duration"`
	LoadDuration       int64 `json:"load_duration"`
	TotalDuration      int64 `json:"total_duration"`
}

// Generate asks /api/generate for n tokens after prompt, keeping the model loaded for
// keepAlive ("" for Ollama's default; "0" unloads it after).
func (o *Ollama) Generate(ctx context.Context, model, prompt string, n int, keepAlive string) (OllamaTimings, error) {
	req := map[string]any{"model": model, "prompt": prompt, "stream": false, "options": map[string]any{"num_predict": n}}
	if keepAlive != "" {
		req["keep_alive"] = keepAlive
	}
	var t OllamaTimings
	return t, o.post(ctx, "/api/generate", req, &t)
}

// Chat asks /api/chat for n tokens in answer to message.
func (o *Ollama) Chat(ctx context.Context, model, message string, n int) (OllamaTimings, error) {
	req := map[string]any{"model": model, "stream": false, "options": map[string]any{"num_predict": n},
		"messages": []map[string]string{{"role": "user", "content": message}}}
	var t OllamaTimings
	return t, o.post(ctx, "/api/chat", req, &t)
}

// OpenAIUsage is what Ollama's OpenAI-compatible API answers of a completion's tokens.
type OpenAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// OpenAIChat asks /v1/chat/completions for n tokens in answer to message.
func (o *Ollama) OpenAIChat(ctx context.Context, model, message string, n int) (OpenAIUsage, error) {
	req := map[string]any{"model": model, "max_tokens": n, "messages": []map[string]string{{"role": "user", "content": message}}}
	var r struct{ Usage OpenAIUsage }
	return r.Usage, o.post(ctx, "/v1/chat/completions", req, &r)
}

func (o *Ollama) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, tail(raw))
	}
	return json.Unmarshal(raw, out)
}
