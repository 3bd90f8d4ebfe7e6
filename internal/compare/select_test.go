package compare

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 2, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec string
		want Selection
	}{
		{"a.jsonl", Selection{Files: []string{"a.jsonl"}}},
		{"a.jsonl,b.jsonl", Selection{Files: []string{"a.jsonl", "b.jsonl"}}},
		{"a.jsonl@pid=42", Selection{Files: []string{"a.jsonl"}, PID: 42}},
		{"a.jsonl,b.jsonl@exe=llama-server,from=30s,to=2m", Selection{Files: []string{"a.jsonl", "b.jsonl"}, Exe: "llama-server",
			From: Bound{Given: "30s", Offset: 30 * time.Second}, To: Bound{Given: "2m", Offset: 2 * time.Minute}}},
		{"a.jsonl,from=0s", Selection{Files: []string{"a.jsonl"}, From: Bound{Given: "0s"}}},
		{"a.jsonl@to=2026-11-28T10:02:00Z", Selection{Files: []string{"a.jsonl"}, To: Bound{Given: "2026-11-28T10:02:00Z", At: at}}},
		{"runs@host/a.jsonl@pid=7", Selection{Files: []string{"runs@host/a.jsonl"}, PID: 7}}, // an @ of the file's own
		{"-", Selection{Files: []string{"-"}}},
	} {
		got, err := Parse(tc.spec)
		tc.want.Spec = tc.spec
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) || !got.From.At.Equal(tc.want.From.At) || !got.To.At.Equal(tc.want.To.At) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"", "an empty file name"},
		{"@pid=3", "an empty file name"},
		{"a.jsonl@pid=x", "pid=x is not a process id"},
		{"a.jsonl@pid=", "pid= needs a value"},
		{"a.jsonl@from=yesterday", "neither an RFC 3339 time"},
		{"a.jsonl@from=-5s", "a negative offset"},
		{"a.jsonl@from=2m,to=30s", "from=2m is not before to=30s"},
		{"a.jsonl@pid=3,exe=llama-cli", "give one"},
		{"a.jsonl@pid=3,b.jsonl", `file "b.jsonl" after the selection`},
	} {
		if _, err := Parse(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestMatches(t *testing.T) {
	p := process{pid: 7, exe: "llama-server", path: "/opt/llama/bin/llama-server"}
	for _, tc := range []struct {
		sel  Selection
		want bool
	}{
		{Selection{}, true},
		{Selection{PID: 7}, true},
		{Selection{PID: 8}, false},
		{Selection{Exe: "llama-server"}, true},
		{Selection{Exe: "/opt/llama/bin/llama-server"}, true},
		{Selection{Exe: "bin/llama-server"}, true},
		{Selection{Exe: "server"}, false},
	} {
		if got := tc.sel.matches(p); got != tc.want {
			t.Errorf("%+v matches %v: %v", tc.sel, p, got)
		}
	}
	if (Selection{}).matches(process{exe: "otelcol"}) {
		t.Error("a resource without a pid (the receiver's own health) matched")
	}
}
