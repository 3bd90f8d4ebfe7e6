package report

import (
	"bytes"
	"compress/gzip"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/perfetto"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/summary"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// recorded is a real full-tracing run of llama-bench on the 1B Q4_0 model (barriers,
// scheduler layer and two software counters on), as the file exporter wrote it.
const recorded = "../../testdata/otlp/llama-1b-full.jsonl.gz"

func open(t *testing.T) *gzip.Reader {
	t.Helper()
	f, err := os.Open(recorded)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// The op table and findings of the recorded run, and its trace, stay what they were.
func TestGolden(t *testing.T) {
	agg := summary.New()
	var trace bytes.Buffer
	w := perfetto.NewWriter(&trace)
	st, err := Read(open(t), recorded, Summary{agg}, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Traces == 0 || st.Metrics == 0 || st.Skipped != 0 {
		t.Errorf("stats %+v", st)
	}
	v := agg.Snapshot()
	advise.Annotate(v)
	var table bytes.Buffer
	if err := Table(&table, v); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "llama-1b-full.table")
	if *update {
		if err := os.WriteFile(golden, table.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if table.String() != string(want) {
		t.Errorf("table differs from %s (go test -update to accept):\n%s", golden, table.String())
	}
	if err := perfetto.Check(&trace); err != nil {
		t.Errorf("trace.json: %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"resourceSpans":[]}` + "\nnot json\n", "x: line 2: not an OTLP JSON line"},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":7}]}]}]}` + "\n", "x: line 1: "},
		{`{"resourceLogs":[]}` + "\n\n" + `{"resourceMetrics":[]}`, ""},
		{`{"resourceSpans":[]}` + "\n" + `{"resourceMetrics":[{"sco`, "x: line 2: the file ends inside a batch"},
	} {
		_, err := Read(strings.NewReader(tc.in), "x", Summary{summary.New()})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want %q...", tc.in, err, tc.want)
		}
	}
}

// A terminal shows a model name as text: escape sequences are escaped.
func TestTextEscapesControls(t *testing.T) {
	if got := Text("m\x1b[31mred\u0007"); got != `m\x1b[31mred\a` {
		t.Errorf("Text = %q", got)
	}
	if got := Text("plain µ"); got != "plain µ" {
		t.Errorf("Text = %q", got)
	}
}

func BenchmarkRead(b *testing.B) {
	raw, err := os.ReadFile(recorded)
	if err != nil {
		b.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	var plain bytes.Buffer
	if _, err := plain.ReadFrom(z); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(plain.Len()))
	for b.Loop() {
		if _, err := Read(bytes.NewReader(plain.Bytes()), recorded, Summary{summary.New()}); err != nil {
			b.Fatal(err)
		}
	}
}

// A phase's heading says how much of its graph time the threads had a CPU, and a process
// under a quota gets the quota's line; a hostile cgroup name is escaped.
func TestTableShared(t *testing.T) {
	v := &summary.View{Processes: []*summary.Process{{
		Title: "llama-server (pid 7)",
		Quota: &summary.Quota{Cgroup: "/job\x1b[2J", CPUs: 1, Periods: 10, Throttled: 9, ThrottledSeconds: 0.8, Threads: 2, SinceMade: true},
		Phases: []*summary.Phase{
			{Name: "decode", CPU: &summary.ThreadsCPU{Graphs: 4, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedDisk}},
			{Name: "prefill", CPU: &summary.ThreadsCPU{Graphs: 2, Share: 0.97, Judged: true, Perturbed: 1}},
			{Name: "outside decode", CPU: &summary.ThreadsCPU{Perturbed: 1, Thin: "not judged: 1 graph left out, run while profinfer attached or placed probes"}},
		},
	}}}
	var b strings.Builder
	if err := Table(&b, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CPU quota: 1.00 CPUs (cgroup /job\x1b[2J) for 2 threads; throttled in 9 of 10 periods (90%), 0.8 s held back, since the cgroup was made`,
		"threads on a CPU 50% of the time of 4 graphs (starved, waiting for the disk: ops are judged by that, not by their wall time)\n",
		"threads on a CPU 97% of the time of 2 graphs; 1 left out, run while profinfer attached or placed probes\n",
		"threads on a CPU not judged: 1 graph left out, run while profinfer attached or placed probes\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Error("a control character reached the terminal")
	}
}

// A process that offloads opens, after its heading, with each backend's part of a token,
// Vulkan named as a person reads it, and the op tables are the CPU's part; a hostile
// backend name is escaped.
func TestTableLead(t *testing.T) {
	dec := &summary.Phase{Name: "decode", Decodes: 10, Tokens: 10, TracedGraphs: 10,
		Ops: []*summary.Op{{Op: "MUL_MAT", Weight: "q4_0", Calls: 10, Share: 0.6}, {Op: "GET_ROWS", Weight: "none", Calls: 10, Share: 0.1}}}
	v := &summary.View{Processes: []*summary.Process{{
		Title:  "node (pid 7)",
		Phases: []*summary.Phase{dec},
		Backends: []summary.Backend{{Backend: "CPU", Splits: 10, Seconds: 0.01},
			{Backend: "VK", Splits: 10, Seconds: 0.02, DeviceSplits: 5, DeviceSeconds: 0.3, WaitSeconds: 0.25, Ops: map[string]int64{"MUL_MAT": 40, "ADD": 20}},
			{Backend: "RPC\x1b[2J", Splits: 10, Seconds: 0.001}},
		Copies: []summary.Copy{{Source: "CPU", Destination: "VK", Copies: 20, Bytes: 40000, Seconds: 0.002}},
	}}}
	var b strings.Builder
	if err := Table(&b, v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Columns are padded to the widest cell: compare words.
	squash := func(s string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			lines[i] = strings.Join(strings.Fields(l), " ")
		}
		return strings.Join(lines, "\n")
	}
	got := squash(out)
	if lines := strings.Split(got, "\n"); len(lines) < 6 || lines[2] != "where a token's time went, by backend: ms a token, over 10 tokens in 10 decodes (decode)" {
		t.Fatalf("the table does not open with the lead:\n%s", out)
	}
	for _, want := range []string{
		"backend share CPU computing CPU handing over copies device, at most CPU waiting splits\n" +
			"Vulkan 98.2% – 2.000 0.200 60.000 50.000 10\n" +
			"CPU 1.6% 1.000 – – – – 10\n" +
			`RPC\x1b[2J 0.2% – 0.100 – – – 10` + "\n",
		"on Vulkan: MUL_MAT 40 nodes, ADD 20 nodes, read from its splits (the device timed none of them)\n" +
			"its device time runs from each handing over until the CPU saw the work done, the CPU's wait included: the device's own is at most that; the mean of the 5 of 10 splits seen done\n" +
			"copies to and from it: 4.0 kB a token\n",
		"on the CPU, decode: MUL_MAT q4_0 60.0%, GET_ROWS 10.0% of its graph time\n",
		`on RPC\x1b[2J: no node read from its splits` + "\nno split seen done: its part is the CPU's handing the work over alone\n",
		"the CPU's part, by op (each backend's is above):\nop weight calls",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a control character reached the terminal")
	}
}

// The roofs line names each kernel class's compute roof and each level's bandwidth.
func TestRoofsLine(t *testing.T) {
	r := summary.Roofs{FLOPS: 231e9, Int8: 930e9, BF16: 460e9, Bandwidth: 45e9, Source: "measured", Measured: "2026-11-28T20:00:00Z",
		Caches: []roofline.Level{{Name: "L1", Size: 64 << 10, Bandwidth: 300e9}, {Name: "L3", Size: 32 << 20, Bandwidth: 180e9}}}
	want := "231.0 GFLOP/s (fp32), 930.0 Gop/s (int8), 460.0 GFLOP/s (bf16), L1 (64 KiB) 300.0 GB/s, L3 (32768 KiB) 180.0 GB/s, DRAM 45.0 GB/s (measured, 2026-11-28T20:00:00Z)"
	if got := roofs(r); got != want {
		t.Errorf("roofs:\n%s\nwant\n%s", got, want)
	}
}
