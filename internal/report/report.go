// Package report reads the file exporter's OTLP JSON lines, a line at a time, and hands
// each batch to whatever builds the outputs: the summary behind the op table and
// report.html, and the Perfetto trace. It never holds more than a few lines at once, so
// a file of any size reads in bounded memory.
package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Sink takes the batches in file order.
type Sink interface {
	Traces(ptrace.Traces) error
	Metrics(pmetric.Metrics) error
}

// Stats counts what a read saw.
type Stats struct {
	Bytes, Lines, Traces, Metrics, Skipped int64
}

// maxLine bounds one line: the file exporter writes one export batch per line, a few MB
// at full tracing.
const maxLine = 256 << 20

type batch struct {
	n      int64 // line number, for errors
	traces ptrace.Traces
	mets   pmetric.Metrics
	kind   int // 0 skipped, 1 traces, 2 metrics
	err    error
}

// Read parses the JSON lines of r and hands every batch to sinks, in order. Lines are
// unmarshalled on every CPU, which is where the time goes. name labels errors.
func Read(r io.Reader, name string, sinks ...Sink) (Stats, error) {
	var st Stats
	br := bufio.NewReaderSize(r, 1<<20)
	workers := runtime.GOMAXPROCS(0)
	// Each line gets a slot in order; workers fill slots, the sinks read them in turn.
	type line struct {
		n    int64
		text []byte
		out  chan batch
	}
	slots := make(chan chan batch, 2*workers)
	lines := make(chan line, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range lines {
				l.out <- parse(l.n, l.text)
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(slots)
		defer close(lines)
		var n int64
		for {
			text, err := readLine(br)
			if len(text) > 0 {
				n++
				st.Bytes += int64(len(text))
				out := make(chan batch, 1)
				slots <- out
				lines <- line{n, text, out}
			}
			if err == io.EOF {
				readErr <- nil
				return
			}
			if err != nil {
				readErr <- fmt.Errorf("%s: line %d: %w", name, n+1, err)
				return
			}
		}
	}()
	var firstErr error
	for slot := range slots {
		b := <-slot
		if firstErr != nil {
			continue // drain, so the reader and workers end
		}
		st.Lines++
		if b.err != nil {
			firstErr = fmt.Errorf("%s: line %d: %w", name, b.n, b.err)
			continue
		}
		for _, s := range sinks {
			var err error
			switch b.kind {
			case 1:
				err = s.Traces(b.traces)
			case 2:
				err = s.Metrics(b.mets)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
		switch b.kind {
		case 0:
			st.Skipped++
		case 1:
			st.Traces++
		case 2:
			st.Metrics++
		}
	}
	wg.Wait()
	if err := <-readErr; err != nil && firstErr == nil {
		firstErr = err
	}
	return st, firstErr
}

// readLine returns the next line without its newline, growing past the reader's buffer.
func readLine(br *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		frag, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, frag...)
			if len(long) > maxLine {
				return nil, fmt.Errorf("a line longer than %d MiB: not the file exporter's JSON lines", maxLine>>20)
			}
			continue
		}
		line := append(long, frag...)
		if long == nil {
			line = bytes.Clone(frag) // ReadSlice's bytes are the buffer's, reused by the next read
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

var (
	tracesPrefix  = []byte(`{"resourceSpans"`)
	metricsPrefix = []byte(`{"resourceMetrics"`)
	logsPrefix    = []byte(`{"resourceLogs"`)
	profPrefix    = []byte(`{"resourceProfiles"`)
)

func parse(n int64, line []byte) batch {
	b := batch{n: n}
	trimmed := bytes.TrimLeft(line, " \t")
	switch {
	case bytes.HasPrefix(trimmed, tracesPrefix):
		b.kind = 1
		b.traces, b.err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
	case bytes.HasPrefix(trimmed, metricsPrefix):
		b.kind = 2
		b.mets, b.err = (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line)
	case bytes.HasPrefix(trimmed, logsPrefix), bytes.HasPrefix(trimmed, profPrefix), len(trimmed) == 0:
	default:
		b.err = errors.New("not an OTLP JSON line (expected resourceSpans or resourceMetrics, as the file exporter writes with format: json)")
	}
	if b.err != nil {
		b.kind = 0
	}
	return b
}
