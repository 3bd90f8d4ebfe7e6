package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A package with a passing, a failing and a skipped test, and one without tests: the
// failing test's output is printed whole, the passing one's not; each ending is a line;
// the summary lists the steps timed, the package and the slow tests, and ends with the
// tests' count; the run failed.
func TestFollow(t *testing.T) {
	in, err := os.Open("testdata/events.json")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out, keep bytes.Buffer
	results, err := follow(in, &out, &keep)
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"boom", "inside", "--- FAIL: TestB", "pass tl TestA (1.1s)", "FAIL tl ("} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "[no test files]") {
		t.Errorf("go test's line for a package without tests printed:\n%s", text)
	}
	if strings.Contains(text, "hello a") {
		t.Errorf("a passing test's log printed:\n%s", text)
	}
	if !failed(results) {
		t.Error("a failed test, and the run did not fail")
	}
	if raw, _ := os.ReadFile("testdata/events.json"); keep.String() != string(raw) {
		t.Error("the events kept differ from the input")
	}
	steps := filepath.Join(t.TempDir(), "times.tsv")
	os.WriteFile(steps, []byte("testenv\t1710\t0\nbuild\t300\t2\n"), 0o644)
	var sum bytes.Buffer
	summarize(&sum, steps, results, time.Second)
	for _, want := range []string{"28.5  testenv", "5.0  build  (exit 2)", "go test tl  FAILED", "tests of 1s or more:", "tl TestA", "tests: 1 passed, 1 failed, 1 skipped\n"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
}

// Output with no result at all (the build failed before any test ran) is an error.
func TestNoResult(t *testing.T) {
	var out bytes.Buffer
	if _, err := follow(strings.NewReader("# pkg\nsyntax error\n"), &out, &bytes.Buffer{}); err == nil || !strings.Contains(out.String(), "syntax error") {
		t.Errorf("err %v, output %q", err, out.String())
	}
}
