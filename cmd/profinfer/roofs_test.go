package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// roofs measures and keeps the roofs where the collector reads them; bad arguments are
// refused naming what is wrong.
func TestRoofsCmd(t *testing.T) {
	state := filepath.Join(t.TempDir(), "lib", "roofline.json")
	if err := roofsCmd([]string{"-state", state, "-probe", "200ms"}); err != nil && !strings.Contains(err.Error(), "provisional") {
		t.Fatal(err) // busy CPUs make them provisional, which says so
	}
	raw, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var kept struct {
		FLOPS     float64 `json:"peak_flops"`
		Bandwidth float64 `json:"peak_bandwidth"`
	}
	if err := json.Unmarshal(raw, &kept); err != nil || kept.FLOPS <= 0 || kept.Bandwidth <= 0 {
		t.Errorf("kept %s: %+v %v", raw, kept, err)
	}
	for args, want := range map[string]string{"-probe 0": "-probe: must be above zero", "extra": "no arguments"} {
		if err := roofsCmd(strings.Fields(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("roofs %s: %v, want %q", args, err, want)
		}
	}
}
