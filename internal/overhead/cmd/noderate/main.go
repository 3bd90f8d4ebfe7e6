// Command noderate measures what one node's agent sends, for sizing a gateway: it runs
// the collector (bin/otelcol-profinfer) with the receiver's default config, or with full
// tracing, while llama-bench generates on the 1B model, and reports the spans, metric
// points and OTLP bytes (protobuf, before compression) per second that reach the
// exporter, and the collector's CPU and peak memory.
//
//	go run ./internal/overhead/cmd/noderate [-tokens 1024] [-configs default,full]
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
	"github.com/prometheus/procfs"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var settings = map[string]string{
	"default": "{}",
	"full":    "{nodes: {mode: all}}",
}

func main() {
	tokens := flag.Int("tokens", 1024, "tokens llama-bench generates (tg)")
	configs := flag.String("configs", "default,full", "receiver configurations")
	flag.Parse()
	fmt.Println("| config | seconds | spans/s | metric points/s | OTLP bytes/s | gzip bytes/s | collector CPU % of a core | collector peak RSS MiB |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range strings.Split(*configs, ",") {
		r, err := measure(c, *tokens)
		if err != nil {
			log.Fatalf("%s: %v", c, err)
		}
		fmt.Printf("| %s | %.1f | %.0f | %.1f | %.0f | %.0f | %.1f | %.0f |\n", c, r.seconds, r.spans/r.seconds, r.points/r.seconds,
			r.bytes/r.seconds, r.gzipped/r.seconds, 100*r.cpu/r.seconds, r.rssMiB)
	}
}

type result struct {
	seconds, spans, points, bytes, gzipped, cpu, rssMiB float64
}

func measure(config string, tokens int) (result, error) {
	var r result
	set, ok := settings[config]
	if !ok {
		return r, fmt.Errorf("unknown config")
	}
	dir, err := os.MkdirTemp("", "noderate")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "out.jsonl")
	cfg := fmt.Sprintf(`receivers:
  profinfer: %s
exporters:
  file: {path: %q}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [profinfer], exporters: [file]}
    metrics: {receivers: [profinfer], exporters: [file]}
`, set, out)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return r, err
	}
	col, err := testbench.Start("bin/otelcol-profinfer", "--config", cfgPath)
	if err != nil {
		return r, err
	}
	defer col.Stop() // on an error; a no-op once it has exited
	for !strings.Contains(col.Stderr.String(), "Everything is ready") {
		if col.Exited() {
			return r, fmt.Errorf("the collector exited: %s", col.Stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The collector's CPU and memory over the workload only, not its start-up.
	proc, err := procfs.NewProc(col.PID())
	if err != nil {
		return r, err
	}
	before, err := proc.Stat()
	if err != nil {
		return r, err
	}
	start := time.Now()
	bench := exec.Command(".testenv/llama.cpp/bin/llama-bench", "-m", ".testenv/models/llama-1b-q4_0.gguf",
		"-p", "0", "-n", strconv.Itoa(tokens), "-t", "2", "-r", "1")
	if out, err := bench.CombinedOutput(); err != nil {
		return r, fmt.Errorf("llama-bench: %v: %s", err, out)
	}
	r.seconds = time.Since(start).Seconds()
	after, err := proc.Stat()
	if err != nil {
		return r, err
	}
	status, err := proc.NewStatus()
	if err != nil {
		return r, err
	}
	r.cpu = after.CPUTime() - before.CPUTime()
	r.rssMiB = float64(status.VmHWM) / (1 << 20)
	_ = syscall.Kill(col.PID(), syscall.SIGINT) // the exporters flush
	if err := col.Wait(context.Background()); err != nil {
		return r, err
	}
	f, err := os.Open(out)
	if err != nil {
		return r, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		line := sc.Bytes()
		var proto []byte
		if td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line); err == nil && td.ResourceSpans().Len() > 0 {
			r.spans += float64(td.SpanCount())
			proto, _ = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		} else if md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line); err == nil {
			r.points += float64(md.DataPointCount())
			proto, _ = (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		}
		r.bytes += float64(len(proto))
		r.gzipped += float64(gzipped(proto))
	}
	return r, sc.Err()
}

// gzipped is the size of b compressed as the OTLP exporters do by default.
func gzipped(b []byte) int {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Len()
}
