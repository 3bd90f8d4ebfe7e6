package compare

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/profinfer/profinfer/internal/schema"
)

// Selection is what one side of a comparison reads: files the file exporter wrote, and
// within them, optionally, one process (or the processes of one executable) and a time
// range. Its text form is
//
//	FILE[,FILE...][@KEY=VALUE[,KEY=VALUE...]]
//
// with KEY one of pid, exe, from, to (the @ may also be a comma: a.jsonl,from=30s). A
// time is RFC 3339 or an offset from the side's first span (30s, 2m).
type Selection struct {
	Spec  string   `json:"spec"` // as given
	Files []string `json:"files"`
	PID   int64    `json:"pid,omitempty"`
	Exe   string   `json:"exe,omitempty"`
	From  Bound    `json:"from,omitzero"`
	To    Bound    `json:"to,omitzero"`
}

// Bound is one end of a time range: a time, or an offset from the side's first span.
type Bound struct {
	Given  string        `json:"given"`
	At     time.Time     `json:"at,omitzero"`
	Offset time.Duration `json:"offset_ns,omitempty"`
}

// IsZero says the bound was not given: the range is open at that end.
func (b Bound) IsZero() bool { return b.Given == "" }

// resolve returns the bound in unix ns, offsets counted from origin.
func (b Bound) resolve(origin int64) int64 {
	if !b.At.IsZero() {
		return b.At.UnixNano()
	}
	return origin + int64(b.Offset)
}

var selectorKeys = []string{"pid=", "exe=", "from=", "to="}

func isSelector(s string) bool {
	for _, k := range selectorKeys {
		if strings.HasPrefix(s, k) {
			return true
		}
	}
	return false
}

// Parse reads a side's selection.
func Parse(spec string) (Selection, error) {
	sel := Selection{Spec: spec}
	files, sels := spec, ""
	// The last @ that starts a selector splits the files from the selection: a file's
	// name may hold an @ of its own.
	for i := strings.LastIndexByte(spec, '@'); i >= 0; i = strings.LastIndexByte(spec[:i], '@') {
		if isSelector(spec[i+1:]) {
			files, sels = spec[:i], spec[i+1:]
			break
		}
	}
	parts := strings.Split(files, ",")
	if sels != "" {
		parts = append(parts, strings.Split(sels, ",")...)
	}
	for _, p := range parts {
		if !isSelector(p) {
			if sel.PID > 0 || sel.Exe != "" || !sel.From.IsZero() || !sel.To.IsZero() {
				return sel, fmt.Errorf("%q: file %q after the selection: name the files first", spec, p)
			}
			if p == "" {
				return sel, fmt.Errorf("%q: an empty file name", spec)
			}
			sel.Files = append(sel.Files, p)
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		if v == "" {
			return sel, fmt.Errorf("%q: %s= needs a value", spec, k)
		}
		var err error
		switch k {
		case "pid":
			sel.PID, err = strconv.ParseInt(v, 10, 64)
			if err != nil || sel.PID <= 0 {
				return sel, fmt.Errorf("%q: pid=%s is not a process id", spec, v)
			}
		case "exe":
			sel.Exe = v
		case "from":
			sel.From, err = parseBound(v)
		case "to":
			sel.To, err = parseBound(v)
		}
		if err != nil {
			return sel, fmt.Errorf("%q: %s=%s: %w", spec, k, v, err)
		}
	}
	if len(sel.Files) == 0 {
		return sel, fmt.Errorf("%q: no file named", spec)
	}
	if sel.PID > 0 && sel.Exe != "" {
		return sel, fmt.Errorf("%q: pid= and exe= both select the process: give one", spec)
	}
	if f, t := sel.From, sel.To; !f.IsZero() && !t.IsZero() && (f.At.IsZero() == t.At.IsZero()) && f.resolve(0) >= t.resolve(0) {
		return sel, fmt.Errorf("%q: from=%s is not before to=%s", spec, f.Given, t.Given)
	}
	return sel, nil
}

func parseBound(v string) (Bound, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return Bound{Given: v, At: t}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return Bound{}, errors.New("neither an RFC 3339 time (2026-11-28T10:02:00Z) nor an offset from the side's first span (30s, 2m)")
	}
	if d < 0 {
		return Bound{}, errors.New("a negative offset: offsets count from the side's first span")
	}
	return Bound{Given: v, Offset: d}, nil
}

// process describes a resource's process, by what a selection matches.
type process struct {
	pid       int64
	exe, path string
}

func processOf(attrs pcommon.Map) process {
	var p process
	if v, ok := attrs.Get(schema.ResourceProcessPID); ok {
		p.pid = schema.Integer(v)
	}
	if v, ok := attrs.Get(schema.ResourceProcessExecutableName); ok {
		p.exe = v.AsString()
	}
	if v, ok := attrs.Get(schema.ResourceProcessExecutablePath); ok {
		p.path = v.AsString()
	}
	if p.exe == "" {
		if v, ok := attrs.Get(schema.ResourceServiceName); ok {
			p.exe = v.AsString()
		}
	}
	return p
}

// String names the process as the errors and headings do: "llama-bench (pid 1234)".
func (p process) String() string {
	name := p.exe
	if name == "" {
		name = "process"
	}
	return fmt.Sprintf("%s (pid %d)", name, p.pid)
}

// matches says whether the selection takes the process: a resource without a pid is the
// receiver's own health, which no side takes.
func (s Selection) matches(p process) bool {
	switch {
	case p.pid == 0:
		return false
	case s.PID > 0:
		return p.pid == s.PID
	case s.Exe != "":
		return p.exe == s.Exe || p.path == s.Exe || strings.HasSuffix(p.path, "/"+s.Exe)
	}
	return true
}

func (s Selection) picksProcess() bool { return s.PID > 0 || s.Exe != "" }

func (s Selection) picksTime() bool { return !s.From.IsZero() || !s.To.IsZero() }
