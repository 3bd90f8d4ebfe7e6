package main

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/compare"
)

// A recording compared with itself: the same setup, no change, and compare.json holds
// the comparison, beside compare.html.
func TestCompareSame(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "run.jsonl")
	unzip(t, "../../testdata/otlp/llama-1b-full.jsonl.gz", in)
	if err := compareCmd([]string{"-o", dir, in, in}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "compare.html")); err != nil {
		t.Error(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c compare.Comparison
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Phases) != 2 || len(c.Warnings) != 0 {
		t.Fatalf("phases %+v, warnings %q", c.Phases, c.Warnings)
	}
	// Two prefills are too few to tell; five decodes are enough.
	for i, want := range []string{"too few steps to tell", "no change beyond noise"} {
		if ph := c.Phases[i]; ph.Change.Value != 0 || ph.Verdict != want || len(ph.Rows) < 2 {
			t.Errorf("%s: %+v, want %q", ph.Phase, ph, want)
		}
	}
	for _, it := range c.Setup {
		if it.Differs {
			t.Errorf("setup item %+v differs from itself", it)
		}
	}
}

func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "run.jsonl")
	unzip(t, "../../testdata/otlp/llama-1b-full.jsonl.gz", in)
	notOTLP := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notOTLP, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{in}, "name two sides"},
		{[]string{filepath.Join(dir, "missing.jsonl"), in}, "side A: open " + filepath.Join(dir, "missing.jsonl") + ": no such file"},
		{[]string{in, notOTLP}, "side B: " + notOTLP + ": line 1: not an OTLP JSON line"},
		{[]string{in, in + "@pid=1"}, "side B (" + in + "@pid=1): no process with pid 1 in its files; they hold llama-bench (pid 11401)"},
		{[]string{in, in + "@from=2m"}, "no llama_decode or step span starts in from=2m"},
		{[]string{in, in + "@pid=x"}, "side B: \"" + in + "@pid=x\": pid=x is not a process id"},
		{[]string{"-phase", "encode", in, in}, "neither side computed the encode phase"},
	} {
		err := compareCmd(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func unzip(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, z); err != nil {
		t.Fatal(err)
	}
}
