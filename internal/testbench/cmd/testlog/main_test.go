package main

import (
	"bytes"
	"fmt"
	"io"
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

// A test's time is its wall time but while paused: the parallel subtests that run after
// its function returned count (go test's Elapsed leaves them out), and a parallel test's
// wait for the serial ones does not.
func TestWallTime(t *testing.T) {
	ev := func(sec int, action, test string, elapsed float64) string {
		return fmt.Sprintf(`{"Time":"2026-12-05T03:00:%02dZ","Action":%q,"Package":"tl","Test":%q,"Elapsed":%g}`+"\n", sec, action, test, elapsed)
	}
	in := ev(0, "run", "TestMatrix", 0) + ev(0, "run", "TestMatrix/a", 0) + ev(0, "pause", "TestMatrix/a", 0) +
		ev(1, "run", "TestParallel", 0) + ev(1, "pause", "TestParallel", 0) +
		ev(1, "cont", "TestMatrix/a", 0) + ev(41, "pass", "TestMatrix/a", 40) + ev(41, "pass", "TestMatrix", 1) +
		ev(41, "cont", "TestParallel", 0) + ev(44, "pass", "TestParallel", 3) +
		`{"Time":"2026-12-05T03:00:44Z","Action":"pass","Package":"tl","Elapsed":44}` + "\n"
	results, err := follow(strings.NewReader(in), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range results {
		got[r.test] = r.secs
	}
	if got["TestMatrix"] != 41 || got["TestParallel"] != 3 || got[""] != 44 {
		t.Errorf("seconds %v, want TestMatrix 41, TestParallel 3, the package 44", got)
	}
}
