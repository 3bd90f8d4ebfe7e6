// Command testlog reads `go test -json` on its input and prints what a run needs said:
// each top-level test as it ends, with its time, the whole output of those that failed,
// each package's result; it keeps the events in a file, and ends with the run's timing
// summary: each step's minutes (from a file of steps the scripts timed) and the slowest
// tests', so that growth shows the day it happens. It exits non-zero where a test or a
// package failed, or the input held no result.
//
//	go test -json ./... | testlog -events build/test.json -steps build/times.tsv
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// event is one record of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// result is a test's or a package's end.
type result struct {
	pkg, test string
	action    string
	secs      float64
}

func main() {
	events := flag.String("events", "", "write the events to this file")
	steps := flag.String("steps", "", "a file of timed steps (name, seconds, status: tab-separated), printed first in the summary")
	slow := flag.Duration("slow", 30*time.Second, "tests that took this long or longer are listed in the summary")
	flag.Parse()
	var keep io.Writer = io.Discard
	if *events != "" {
		f, err := os.Create(*events)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
			os.Exit(2)
		}
		defer f.Close()
		keep = f
	}
	results, err := follow(os.Stdin, os.Stdout, keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
	}
	summarize(os.Stdout, *steps, results, *slow)
	if err != nil || failed(results) {
		os.Exit(1)
	}
}

// follow reads events from in, keeping each line in keep, printing a line a top-level
// test as it ends and the output of those that failed; it returns the results.
func follow(in io.Reader, out, keep io.Writer) ([]result, error) {
	var results []result
	outputs := map[[2]string]*strings.Builder{} // a running test's output, by package and test
	clocks := map[[2]string]*clock{}            // a top-level test's wall time
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		fmt.Fprintf(keep, "%s\n", line)
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			fmt.Fprintf(out, "%s\n", line) // the build's own output
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		k := [2]string{e.Package, top}
		switch e.Action {
		case "run", "cont":
			if !sub {
				c := clocks[k]
				if c == nil {
					c = &clock{}
					clocks[k] = c
				}
				c.since = e.Time
			}
		case "pause":
			if c := clocks[k]; c != nil && !sub {
				c.stop(e.Time)
			}
		case "output":
			if e.Test == "" {
				// go test's own closing lines are said by the package's result; "?" is its
				// line for a package without tests, which a reader of the log's end could
				// take for a run that tested nothing.
				if !strings.HasPrefix(e.Output, "ok ") && !strings.HasPrefix(e.Output, "FAIL") && !strings.HasPrefix(e.Output, "PASS") && !strings.HasPrefix(e.Output, "? ") {
					fmt.Fprint(out, e.Output) // a package's own output: a build failure, a panic
				}
				continue
			}
			b := outputs[k]
			if b == nil {
				b = &strings.Builder{}
				outputs[k] = b
			}
			if b.Len() < 4<<20 {
				b.WriteString(e.Output)
			}
		case "pass", "fail", "skip":
			if sub {
				continue
			}
			// A test's Elapsed leaves out its parallel subtests, which run after its own
			// function returns (the kernel matrix's guests: 6 minutes, said as 2.5 s):
			// its wall time, from its run to its end but while paused (a parallel test
			// waits for the serial ones), is what the run spent on it.
			secs := e.Elapsed
			if c := clocks[k]; c != nil && e.Test != "" {
				c.stop(e.Time)
				secs = max(secs, c.ran.Seconds())
			}
			results = append(results, result{pkg: e.Package, test: e.Test, action: e.Action, secs: secs})
			if e.Test == "" {
				fmt.Fprintf(out, "%-4s %s (%.1fs)\n", strings.ToUpper(e.Action), e.Package, secs)
				continue
			}
			if e.Action == "fail" && outputs[k] != nil {
				fmt.Fprint(out, outputs[k].String())
			} else if secs >= 1 {
				fmt.Fprintf(out, "  %s %s %s (%.1fs)\n", e.Action, short(e.Package), e.Test, secs)
			}
			delete(outputs, k)
			delete(clocks, k)
		}
	}
	if err := sc.Err(); err != nil {
		return results, err
	}
	if !slices.ContainsFunc(results, func(r result) bool { return r.test == "" }) {
		return results, fmt.Errorf("no package's result in the input")
	}
	return results, nil
}

// clock is a test's wall time, paused while the test is.
type clock struct {
	since time.Time // zero while paused
	ran   time.Duration
}

func (c *clock) stop(at time.Time) {
	if !c.since.IsZero() && !at.IsZero() {
		c.ran += at.Sub(c.since)
	}
	c.since = time.Time{}
}

func failed(results []result) bool {
	return slices.ContainsFunc(results, func(r result) bool { return r.action == "fail" })
}

// short is a package's path inside the module.
func short(pkg string) string {
	if _, rest, ok := strings.Cut(pkg, "/profinfer/profinfer/"); ok {
		return rest
	}
	return pkg
}

// summarize prints the steps' minutes, each package's, and the tests that took slow or
// longer, slowest first.
func summarize(out io.Writer, steps string, results []result, slow time.Duration) {
	fmt.Fprintln(out, "\ntiming summary (minutes)")
	if steps != "" {
		if b, err := os.ReadFile(steps); err == nil {
			for line := range strings.Lines(string(b)) {
				f := strings.Split(strings.TrimSpace(line), "\t")
				if len(f) < 2 {
					continue
				}
				secs, _ := strconv.ParseFloat(f[1], 64)
				status := ""
				if len(f) > 2 && f[2] != "0" {
					status = "  (exit " + f[2] + ")"
				}
				fmt.Fprintf(out, "  %6.1f  %s%s\n", secs/60, f[0], status)
			}
		}
	}
	var tests []result
	for _, r := range results {
		if r.test == "" {
			fmt.Fprintf(out, "  %6.1f  go test %s%s\n", r.secs/60, short(r.pkg), failedMark(r))
		} else if r.secs >= slow.Seconds() {
			tests = append(tests, r)
		}
	}
	slices.SortFunc(tests, func(a, b result) int { return cmp.Compare(b.secs, a.secs) })
	if len(tests) > 0 {
		fmt.Fprintf(out, "tests of %s or more:\n", slow)
	}
	for _, r := range tests {
		fmt.Fprintf(out, "  %6.1f  %s %s%s\n", r.secs/60, short(r.pkg), r.test, failedMark(r))
	}
	if counts := tally(results); counts["pass"]+counts["fail"]+counts["skip"] > 0 {
		// The run's last line, in the plain form any CI reads as a test count.
		fmt.Fprintf(out, "tests: %d passed, %d failed, %d skipped\n", counts["pass"], counts["fail"], counts["skip"])
	}
}

// tally counts the top-level tests by their ending.
func tally(results []result) map[string]int {
	counts := map[string]int{}
	for _, r := range results {
		if r.test != "" {
			counts[r.action]++
		}
	}
	return counts
}

func failedMark(r result) string {
	if r.action == "fail" {
		return "  FAILED"
	}
	return ""
}
