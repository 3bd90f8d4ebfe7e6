package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/profinfer/profinfer/internal/compare"
	"github.com/profinfer/profinfer/internal/page"
	"github.com/profinfer/profinfer/internal/report"
)

const sideSyntax = "FILE[,FILE...][@pid=N|exe=NAME][,from=T][,to=T]"

func compareCmd(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	dir := fs.String("o", "", "directory to write compare.json and compare.html into (none by default)")
	phase := fs.String("phase", "", "compare this phase alone: prefill or decode (encode, compute for other runtimes)")
	floor := fs.Float64("floor", 0, "the noise floor, the relative change two runs of the same thing show, for every phase (default: calibrated, 25% prefill, 15% others)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("compare: name two sides, A then B, each %s", sideSyntax)
	}
	var sides []*compare.Side
	for i, name := range []string{"A", "B"} {
		sel, err := compare.Parse(fs.Arg(i))
		if err != nil {
			return fmt.Errorf("side %s: %w", name, err)
		}
		sides = append(sides, compare.NewSide(name, sel))
	}
	if err := readSides(sides); err != nil {
		return err
	}
	c, err := compare.Diff(sides[0], sides[1], compare.Options{Phase: *phase, Floor: *floor})
	if err != nil {
		return err
	}
	if err := report.Compare(os.Stdout, c); err != nil {
		return err
	}
	if *dir == "" {
		return nil
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	out, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return err
	}
	path := filepath.Join(*dir, "compare.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", path)

	// compare.html: the same comparison as a page, self-contained like report.html.
	html := filepath.Join(*dir, "compare.html")
	if err := page.WriteCompareFile(html, c); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", html)
	return nil
}

// readSides reads each file once, in the order the sides name them, into every side
// that names it: the same recording may be both sides, with two selections, and - (standard
// input) may be named on both.
func readSides(sides []*compare.Side) error {
	var files []string
	for _, s := range sides {
		for _, f := range s.Sel.Files {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		var sinks []report.Sink
		var names []string
		for _, s := range sides {
			if slices.Contains(s.Sel.Files, f) {
				sinks = append(sinks, s)
				names = append(names, s.Name)
			}
		}
		if _, err := readFile(f, sinks...); err != nil {
			return fmt.Errorf("side %s: %w", strings.Join(names, " and "), err)
		}
	}
	return nil
}
