package report

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/summary"
)

// framed appends msg as the file exporter's proto format frames it.
func framed(out, msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32(out, uint32(len(msg))), msg...)
}

type logSink []plog.Logs

func (logSink) Traces(ptrace.Traces) error    { return nil }
func (logSink) Metrics(pmetric.Metrics) error { return nil }
func (l *logSink) Logs(ld plog.Logs) error {
	*l = append(*l, ld)
	return nil
}

// The recorded run written with format: proto instead reads to the same table, a log
// record and a batch of no record skipped; the log record goes to a sink that takes them.
func TestReadProto(t *testing.T) {
	var stream []byte
	sc := bufio.NewScanner(open(t))
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		var msg []byte
		var err error
		if td, terr := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line); terr == nil && bytes.HasPrefix(line, tracesPrefix) {
			msg, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		} else {
			md, merr := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line)
			if merr != nil {
				t.Fatal(merr)
			}
			msg, err = (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		}
		if err != nil {
			t.Fatal(err)
		}
		stream = framed(stream, msg)
	}
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetStr("a finding")
	lr.SetTimestamp(1)
	msg, _ := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	stream = framed(stream, msg)
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty()
	msg, _ = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	stream = framed(stream, msg)

	tables := map[string]string{}
	for name, in := range map[string]func() []byte{
		"json":  func() []byte { var b bytes.Buffer; _, _ = b.ReadFrom(open(t)); return b.Bytes() },
		"proto": func() []byte { return stream },
	} {
		agg := summary.New()
		st, err := Read(bytes.NewReader(in()), name, Summary{agg})
		if err != nil {
			t.Fatal(err)
		}
		if st.Traces == 0 || st.Metrics == 0 || name == "proto" && st.Skipped != 2 {
			t.Errorf("%s: stats %+v", name, st)
		}
		var table bytes.Buffer
		if err := Table(&table, agg.Snapshot()); err != nil {
			t.Fatal(err)
		}
		tables[name] = table.String()
	}
	var logs logSink
	if st, err := Read(bytes.NewReader(stream), "proto", &logs); err != nil || st.Logs != 1 || st.Skipped != 1 ||
		len(logs) != 1 || logs[0].LogRecordCount() != 1 {
		t.Errorf("with a log sink: stats %+v, %d batches of logs, %v", st, len(logs), err)
	}
	if tables["json"] != tables["proto"] {
		t.Errorf("the proto stream's table differs from the JSON lines':\n%s\n%s", tables["proto"], tables["json"])
	}
}

func TestReadProtoErrors(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("llama_decode")
	sp.SetStartTimestamp(1)
	good, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{framed(nil, []byte{0x0a, 0x04, 0x12, 0x02, 0x12, 0x00}), "x: message 1: not an OTLP message"}, // an empty record
		{framed(nil, []byte{0x0a, 0x05, 0x12}), "x: message 1: not an OTLP message"},
		{framed(nil, []byte{0x0a, 0x06, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01}), "x: message 1: not an OTLP message"}, // a varint alone
		{framed(nil, good)[:10], "x: message 1: the file ends inside a batch, a message of"},
		{[]byte{0, 0}, "x: message 1: the file ends inside a batch, inside a message's size"},
		{[]byte{0x0f, 0xff, 0xff, 0xff}, "x: message 1: the file ends inside a batch, a message of"},
		{[]byte{0x0f, 0xff, 0xff, 0xff, 0}, "x: message 1: the file ends inside a batch, a message of"},
		{append(framed(nil, good), 0x7f, 0, 0, 0), "x: message 2: a message of 2032 MiB: not the file exporter's proto stream"},
		{[]byte("hello\n"), "x: line 1: not an OTLP JSON line"}, // neither format: read as JSON lines, which says so
	} {
		_, err := Read(bytes.NewReader(tc.in), "x", Summary{summary.New()})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%x: error %v, want %q...", tc.in, err, tc.want)
		}
		if cut := strings.Contains(tc.want, "inside a batch"); errors.Is(err, ErrCut) != cut {
			t.Errorf("%x: error %v, ErrCut %v", tc.in, err, cut)
		}
	}
}
