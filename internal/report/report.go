// Package report reads the file exporter's OTLP, JSON lines or its proto stream, a batch
// at a time, and hands each batch to whatever builds the outputs: the summary behind the
// op table and report.html, and the Perfetto trace. It never holds more than a few
// batches at once, so a file of any size reads in bounded memory.
package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Sink takes the batches in file order.
type Sink interface {
	Traces(ptrace.Traces) error
	Metrics(pmetric.Metrics) error
}

// LogSink is a Sink that takes the log records too: the findings connector's, written
// beside the spans and metrics. Without one, log records are skipped unread.
type LogSink interface {
	Logs(plog.Logs) error
}

// Stats counts what a read saw.
type Stats struct {
	Bytes, Lines, Traces, Metrics, Logs, Skipped int64 // Lines counts a proto stream's messages
}

// maxLine bounds one line or message: the file exporter writes one export batch in each,
// a few MB at full tracing.
const maxLine = 256 << 20

type batch struct {
	n      int64 // line number, for errors
	traces ptrace.Traces
	mets   pmetric.Metrics
	logs   plog.Logs
	kind   signal // none: skipped
	err    error
}

// signal is what a batch carries.
type signal int

const (
	none signal = iota // nothing to read, or not read
	spans
	metrics
	logRecords
	unknown // not OTLP
)

// ErrCut is what Read's error wraps where its input ends inside a batch: the file was cut
// short, or is still being written.
var ErrCut = errors.New("the file ends inside a batch")

// Read parses what the file exporter wrote to r, JSON lines or its proto stream, and
// hands every batch to sinks, in order. Batches are unmarshalled on every CPU, which is
// where the time goes. name labels errors.
func Read(r io.Reader, name string, sinks ...Sink) (Stats, error) {
	var st Stats
	br := bufio.NewReaderSize(r, 1<<20)
	next, parse, unit := readLine, parseLine, "line"
	if isProto(br) {
		next, parse, unit = readMessage, parseMessage, "message"
	}
	logs := slices.ContainsFunc(sinks, func(s Sink) bool { _, ok := s.(LogSink); return ok })
	workers := runtime.GOMAXPROCS(0)
	// Each line gets a slot in order; workers fill slots, the sinks read them in turn.
	type line struct {
		n    int64
		text []byte
		cut  bool // the last line, without its newline
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
				b := parse(l.n, l.text, logs)
				if b.err != nil && l.cut {
					b.err = fmt.Errorf("%w (%w)", ErrCut, b.err)
				}
				l.out <- b
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(slots)
		defer close(lines)
		var n int64
		for {
			text, err := next(br)
			if len(text) > 0 {
				n++
				st.Bytes += int64(len(text))
				out := make(chan batch, 1)
				slots <- out
				lines <- line{n, text, err == io.EOF, out}
			}
			if err == io.EOF {
				readErr <- nil
				return
			}
			if err != nil {
				readErr <- fmt.Errorf("%s: %s %d: %w", name, unit, n+1, err)
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
			firstErr = fmt.Errorf("%s: %s %d: %w", name, unit, b.n, b.err)
			continue
		}
		for _, s := range sinks {
			var err error
			switch b.kind {
			case spans:
				err = s.Traces(b.traces)
			case metrics:
				err = s.Metrics(b.mets)
			case logRecords:
				if ls, ok := s.(LogSink); ok {
					err = ls.Logs(b.logs)
				}
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
		switch b.kind {
		case none:
			st.Skipped++
		case spans:
			st.Traces++
		case metrics:
			st.Metrics++
		case logRecords:
			st.Logs++
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

func parseLine(n int64, line []byte, logs bool) batch {
	b := batch{n: n}
	trimmed := bytes.TrimLeft(line, " \t")
	switch {
	case bytes.HasPrefix(trimmed, tracesPrefix):
		b.kind = spans
		b.traces, b.err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
	case bytes.HasPrefix(trimmed, metricsPrefix):
		b.kind = metrics
		b.mets, b.err = (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line)
	case logs && bytes.HasPrefix(trimmed, logsPrefix):
		b.kind = logRecords
		b.logs, b.err = (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
	case bytes.HasPrefix(trimmed, logsPrefix), bytes.HasPrefix(trimmed, profPrefix), len(trimmed) == 0:
	default:
		b.err = errors.New("not an OTLP JSON line (expected resourceSpans or resourceMetrics, as the file exporter writes with format: json) nor its proto stream (format: proto)")
	}
	if b.err != nil {
		b.kind = none
	}
	return b
}
