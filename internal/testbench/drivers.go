package testbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// BenchResult is one row of llama-bench's JSON output.
type BenchResult struct {
	NPrompt  int     `json:"n_prompt"`
	NGen     int     `json:"n_gen"`
	Threads  int     `json:"n_threads"`
	AvgTS    float64 `json:"avg_ts"`
	StddevTS float64 `json:"stddev_ts"`
}

// BenchArgs are llama-bench's arguments for a run of model: prompt tokens (pp) and
// generated tokens (tg), each as its own test, with threads and repetitions.
func (e *Env) BenchArgs(model string, pp, tg, threads, reps int, extra ...string) []string {
	return append([]string{"-m", e.Model(model), "-p", strconv.Itoa(pp), "-n", strconv.Itoa(tg),
		"-t", strconv.Itoa(threads), "-r", strconv.Itoa(reps), "-o", "json"}, extra...)
}

// Bench runs llama-bench to completion and returns its results.
func (e *Env) Bench(ctx context.Context, args ...string) ([]BenchResult, error) {
	out, err := Run(ctx, e.Bin("llama-bench"), args...)
	if err != nil {
		return nil, err
	}
	return ParseBench(out)
}

// ParseBench decodes llama-bench's `-o json` output.
func ParseBench(out []byte) ([]BenchResult, error) {
	var rs []BenchResult
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("llama-bench output: %w", err)
	}
	return rs, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Server is a running llama-server on 127.0.0.1.
type Server struct {
	*Process
	URL string
}

// StartServer starts the llama-server executable exe (Bin("llama-server") or
// StaticServer()) on model with threads and waits until it serves.
func (e *Env) StartServer(ctx context.Context, exe, model string, threads int, extra ...string) (*Server, error) {
	return e.StartServerWith(ctx, nil, exe, model, threads, extra...)
}

// StartServerWith is StartServer through wrap (a Cgroup's Command); nil starts it directly.
func (e *Env) StartServerWith(ctx context.Context, wrap func(string, ...string) (string, []string), exe, model string, threads int,
	extra ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-m", e.Model(model), "-t", strconv.Itoa(threads), "--host", "127.0.0.1",
		"--port", strconv.Itoa(port), "-c", "1024", "-np", "1"}, extra...)
	name := exe
	if wrap != nil {
		name, args = wrap(exe, args...)
	}
	p, err := Start(name, args...)
	if err != nil {
		return nil, err
	}
	s := &Server{Process: p, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	if err := s.waitHealthy(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitHealthy(ctx context.Context) error {
	for {
		if s.Exited() {
			return fmt.Errorf("llama-server exited: %s", tail(s.Stderr.Bytes()))
		}
		if resp, err := http.Get(s.URL + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("llama-server not healthy: %w; stderr: %s", ctx.Err(), tail(s.Stderr.Bytes()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Complete sends one completion request and returns the number of tokens generated.
func (s *Server) Complete(ctx context.Context, prompt string, n int) (int, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": n, "cache_prompt": false})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/completion", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		TokensPredicted int `json:"tokens_predicted"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("llama-server: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	return r.TokensPredicted, nil
}

// RPCServer is a running ggml-rpc-server on 127.0.0.1.
type RPCServer struct {
	*Process
	Addr string // host:port, as --rpc takes it
}

// StartRPCServer starts ggml-rpc-server with threads and waits until it accepts connections.
func (e *Env) StartRPCServer(ctx context.Context, threads int) (*RPCServer, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	p, err := Start(e.Bin("ggml-rpc-server"), "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-t", strconv.Itoa(threads))
	if err != nil {
		return nil, err
	}
	s := &RPCServer{Process: p, Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	for {
		if c, err := net.Dial("tcp", s.Addr); err == nil {
			c.Close()
			return s, nil
		}
		if s.Exited() {
			return nil, fmt.Errorf("ggml-rpc-server exited: %s", tail(s.Stderr.Bytes()))
		}
		select {
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("ggml-rpc-server not listening: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NodeResult is the node-llama-cpp driver's report.
type NodeResult struct {
	PID     int     `json:"pid"`
	Tokens  int     `json:"tokens"`
	Seconds float64 `json:"seconds"`
}

// NodeArgs are the node driver's arguments: generate maxTokens tokens, repeat times.
func (e *Env) NodeArgs(model string, maxTokens, threads, repeat int) []string {
	return []string{e.NodeDriver(), e.Model(model), strconv.Itoa(maxTokens), strconv.Itoa(threads), strconv.Itoa(repeat)}
}

// ParseNode decodes the node driver's output.
func ParseNode(out []byte) (NodeResult, error) {
	var r NodeResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return r, fmt.Errorf("node driver output %q: %w", out, err)
	}
	return r, nil
}

// Completion is llama-server's answer to a /completion request: the slot it ran on, what
// it generated, whether the slot's context cut it (truncated), and its own timings.
type Completion struct {
	Slot            int  `json:"id_slot"`
	TokensPredicted int  `json:"tokens_predicted"`
	Truncated       bool `json:"truncated"`
	Timings         struct {
		PromptN             int     `json:"prompt_n"`
		CacheN              int     `json:"cache_n"`
		PredictedN          int     `json:"predicted_n"`
		PromptMS            float64 `json:"prompt_ms"`
		PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	} `json:"timings"`
	// Done is when the answer came back.
	Done time.Time `json:"-"`
}

// CompleteCached sends one completion request that may reuse the slot's cached prompt
// prefix, and returns the server's account of it.
func (s *Server) CompleteCached(ctx context.Context, prompt string, n int) (Completion, error) {
	return s.Request(ctx, map[string]any{"prompt": prompt, "n_predict": n, "cache_prompt": true})
}

// Request sends a /completion request of body's fields and returns the server's account
// of it.
func (s *Server) Request(ctx context.Context, body map[string]any) (Completion, error) {
	var c Completion
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/completion", bytes.NewReader(b))
	if err != nil {
		return c, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("llama-server: %s", resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&c)
	c.Done = time.Now()
	return c, err
}

// CompleteCut streams a completion of up to n tokens and hangs up after chunks of them,
// as a client that goes away mid-generation.
func (s *Server) CompleteCut(ctx context.Context, prompt string, n, chunks int) error {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": n, "stream": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/completion", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for got := 0; got < chunks && sc.Scan(); {
		if bytes.HasPrefix(sc.Bytes(), []byte("data: ")) {
			got++
		}
	}
	return sc.Err()
}

// Stream sends a streamed /completion request of body's fields, calls token after each
// token it receives (with how many came so far), and returns the server's account of it,
// from its last chunk.
func (s *Server) Stream(ctx context.Context, body map[string]any, token func(n int)) (Completion, error) {
	var c Completion
	body["stream"] = true
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/completion", bytes.NewReader(b))
	if err != nil {
		return c, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("llama-server: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var chunk struct {
			Stop bool `json:"stop"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return c, fmt.Errorf("llama-server's chunk %q: %w", data, err)
		}
		if chunk.Stop {
			err = json.Unmarshal(data, &c)
			c.Done = time.Now()
			return c, err
		}
		n++
		if token != nil {
			token(n)
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	return c, fmt.Errorf("llama-server's stream ended without its last chunk")
}
