package overhead

import (
	_ "embed"
	"strings"
)

//go:embed naive.bt
var naive string

// NaiveReady is the line the naive script prints once all its probes are attached.
const NaiveReady = "naive: probes attached"

// NaiveScript is the naive peer's bpftrace program for the GGML CPU backend at lib, which
// must be the library's real path (bpftrace names the probes by it).
func NaiveScript(lib string) string { return strings.ReplaceAll(naive, "{{lib}}", lib) }
