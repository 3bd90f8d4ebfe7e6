package report

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The file exporter's format: proto writes each export as its OTLP message, its size
// before it in 4 bytes, big-endian. Nothing in the stream says which signal a message
// carries: its records' own fields tell (signalOf).

// isProto says whether br holds the file exporter's proto stream rather than JSON lines.
// A stream begins with its first message's size, under maxLine: a first byte under
// 0x10, which no JSON line begins with (a blank line aside). Anything else is read as
// JSON lines, which names what is wrong with it.
func isProto(br *bufio.Reader) bool {
	b, err := br.Peek(1)
	if err != nil {
		return false
	}
	switch b[0] {
	case '\t', '\n', '\r':
		return false
	}
	return b[0] < 0x10
}

// readMessage returns the next message of a proto stream.
func readMessage(br *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w, inside a message's size", ErrCut)
		}
		return nil, err // io.EOF between messages: the end
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxLine {
		return nil, fmt.Errorf("a message of %d MiB: not the file exporter's proto stream", n>>20)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(br, msg); err != nil {
		return nil, fmt.Errorf("%w, a message of %d bytes", ErrCut, n)
	}
	return msg, nil
}

func parseMessage(n int64, msg []byte, logs bool) batch {
	b := batch{n: n, kind: signalOf(msg)}
	switch b.kind {
	case spans:
		b.traces, b.err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(msg)
	case metrics:
		b.mets, b.err = (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(msg)
	case logRecords:
		if !logs {
			b.kind = none
			break
		}
		b.logs, b.err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(msg)
	case unknown:
		b.err = errors.New("not an OTLP message (spans, metrics or logs, as the file exporter writes with format: proto)")
	}
	if b.err != nil {
		b.kind = none
	}
	return b
}

// signalOf tells which signal an OTLP message carries from its first record. Traces,
// metrics and logs nest alike (field 1 the resource's, field 2 a scope's, field 2 the
// records), and a record's fields tell them apart, though their numbers overlap: a span
// has its start and end times in fields 7 and 8, fixed64s; a log record its times in
// fields 1 and 11, fixed64s; a metric neither, and its data is a message in field 5, 7,
// 9, 10 or 11.
func signalOf(msg []byte) signal {
	record, ok := first(msg, 1, 2, 2)
	switch {
	case !ok:
		return unknown
	case record == nil:
		return none
	}
	found := unknown
	for len(record) > 0 {
		num, typ, n := protowire.ConsumeTag(record)
		if n < 0 {
			return unknown
		}
		record = record[n:]
		switch {
		case (num == 7 || num == 8) && typ == protowire.Fixed64Type:
			return spans
		case (num == 1 || num == 11) && typ == protowire.Fixed64Type:
			return logRecords
		case (num == 5 || num == 7 || num == 9 || num == 10 || num == 11) && typ == protowire.BytesType:
			found = metrics
		}
		if n = protowire.ConsumeFieldValue(num, typ, record); n < 0 {
			return unknown
		}
		record = record[n:]
	}
	return found
}

// first returns the first record of msg nested in the length-delimited fields of path,
// nil where there is none; ok is false where msg is malformed.
func first(msg []byte, path ...protowire.Number) (record []byte, ok bool) {
	if len(path) == 0 {
		return msg, true
	}
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, false
		}
		msg = msg[n:]
		if num == path[0] && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return nil, false
			}
			msg = msg[n:]
			if record, ok := first(v, path[1:]...); !ok || record != nil {
				return record, ok
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
			return nil, false
		}
		msg = msg[n:]
	}
	return nil, true
}
