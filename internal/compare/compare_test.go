package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/signals"
)

func diff(t *testing.T, a, b *Side) *Comparison {
	t.Helper()
	c, err := Diff(a, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(c); err != nil {
		t.Fatalf("the comparison does not marshal: %v", err)
	}
	return c
}

func phaseOf(t *testing.T, c *Comparison, name string) PhaseDiff {
	t.Helper()
	for _, ph := range c.Phases {
		if ph.Phase == name {
			return ph
		}
	}
	t.Fatalf("no %s phase in %+v", name, c.Phases)
	return PhaseDiff{}
}

func rowOf(ph PhaseDiff, op, presence string) *Row {
	for i, r := range ph.Rows {
		if r.Op == op && r.Presence == presence {
			return &ph.Rows[i]
		}
	}
	return nil
}

// Two runs of the same thing, with a spread of ±20% per node and step, say no change.
func TestSameThing(t *testing.T) {
	graph := func(int) []spec { return layers(4, "q4_0", 500_000) }
	a := side(t, "A", "a.jsonl", run(bench, 1, 200, 0.2, graph)...)
	b := side(t, "B", "b.jsonl", run(bench, 2, 200, 0.2, graph)...)
	ph := phaseOf(t, diff(t, a, b), "decode")
	if ph.Beyond || ph.Verdict != "no change beyond noise" {
		t.Errorf("verdict %q, change %+v", ph.Verdict, ph.Change)
	}
	for _, r := range ph.Rows {
		if r.Beyond {
			t.Errorf("row %+v beyond noise in two runs of the same thing", r)
		}
	}
	if ph.A.Blocks < maxBlocks/2 || ph.A.Blocks > maxBlocks || ph.A.Steps != 200 || ph.A.TracedSteps != 200 {
		t.Errorf("side A %+v", ph.A)
	}
}

// A change of quantisation is one row per op whose weights changed, which carries the
// change; the ops whose time did not change stay within the noise.
func TestQuantisation(t *testing.T) {
	a := side(t, "A", "a.jsonl", run(bench, 1, 120, 0.1, func(int) []spec { return layers(4, "q4_0", 500_000) })...)
	b := side(t, "B", "b.jsonl", run(bench, 2, 120, 0.1, func(int) []spec { return layers(4, "f16", 1_500_000) })...)
	ph := phaseOf(t, diff(t, a, b), "decode")
	if !ph.Beyond || ph.Verdict != "slower" {
		t.Fatalf("verdict %q, change %+v", ph.Verdict, ph.Change)
	}
	mm := ph.Rows[0]
	if mm.Op != "MUL_MAT" || mm.WeightA != "q4_0" || mm.WeightB != "f16" || mm.Presence != "both" || mm.Nodes != 4 || !mm.Beyond {
		t.Errorf("first row %+v, want MUL_MAT q4_0 → f16 on 4 nodes", mm)
	}
	// 4 matmuls, each 1 ms longer: 4 ms a token of the change, nearly all of it.
	if math.Abs(mm.Change.Value-4) > 0.3 || mm.Share < 0.9 || mm.Change.Low > mm.Change.Value || mm.Change.High < mm.Change.Value {
		t.Errorf("MUL_MAT change %+v, share %.2f", mm.Change, mm.Share)
	}
	if add := rowOf(ph, "ADD", "both"); add == nil || add.Beyond {
		t.Errorf("ADD %+v, want unchanged", add)
	}
	if last := ph.Rows[len(ph.Rows)-1]; last.Kind != "outside" || last.Beyond {
		t.Errorf("last row %+v, want what the ops leave, unchanged", last)
	}
	// A floor above the change: no change beyond noise.
	c, err := Diff(a, b, Options{Floor: 3})
	if ph := c.Phases[0]; err != nil || ph.Floor != 3 || ph.Beyond || ph.Rows[0].Beyond {
		t.Errorf("-floor 3: %v, %+v", err, ph)
	}
}

// A fused pair on one side and the unfused nodes on the other are rows of their own,
// present on one side; a node whose shape grows with the KV cache stays one node.
func TestOneSideAndGrowingShapes(t *testing.T) {
	kq := func(i int) spec {
		return spec{op: "MUL_MAT", name: "kq-0", weight: "f16", ns: 100_000, shape: [4]int64{int64(256 + i), 1, 8, 1}}
	}
	unfused := func(i int) []spec {
		return []spec{{op: "RMS_NORM", name: "norm-0", ns: 30_000}, {op: "MUL", name: "attn_norm-0", ns: 30_000}, kq(i)}
	}
	fused := func(i int) []spec {
		return []spec{{op: "RMS_NORM", name: "norm-0", fused: "MUL", ns: 40_000}, kq(2 * i)}
	}
	a := side(t, "A", "a.jsonl", run(bench, 1, 40, 0, unfused)...)
	b := side(t, "B", "b.jsonl", run(bench, 2, 40, 0, fused)...)
	ph := phaseOf(t, diff(t, a, b), "decode")
	for _, w := range []struct{ op, presence string }{{"RMS_NORM", "a"}, {"MUL", "a"}, {"RMS_NORM+MUL", "b"}} {
		if r := rowOf(ph, w.op, w.presence); r == nil || r.Nodes != 1 {
			t.Errorf("%s present on %s: %+v", w.op, w.presence, r)
		}
	}
	if r := rowOf(ph, "MUL_MAT", "both"); r == nil || r.Nodes != 1 || r.ShapesDiffer != 0 || r.Tensors[0] != "kq-#" {
		t.Errorf("kq: %+v, want one node on both sides, its growing shape no difference", r)
	}
	if n := len(a.phases["decode"].table.list); n != 4 {
		t.Errorf("A has %d identities, want 3 nodes and its graph", n)
	}
}

// Layers computed on the CPU in A and on a device in B read as moved; the device's time
// is its own row, and each step lasts until its device's work is done.
func TestMovedToDevice(t *testing.T) {
	onCPU := func(start uint64) *assemble.Step {
		return step(1, start, true, 100_000, layers(2, "f32", 1_000_000)...)
	}
	onDevice := func(start uint64) *assemble.Step {
		d := step(1, start, true, 100_000, spec{op: "GET_ROWS", name: "inp_embd", weight: "f32", ns: 10_000})
		var infos []*assemble.NodeInfo
		for _, s := range layers(2, "f32", 0) {
			infos = append(infos, s.info())
		}
		// llama_decode returns once the work is queued: the device is done 1 ms later.
		d.Splits = []assemble.Split{{TID: 1, Backend: "Vulkan0", NNodes: len(infos), Start: d.End - 50_000, End: d.End - 40_000,
			Device: true, Done: d.End + 1_000_000, Wait: 900_000, Nodes: infos}}
		return d
	}
	var sa, sb []*assemble.Step
	for i := range 30 {
		sa = append(sa, onCPU(uint64(1e9+i*10_000_000)))
		sb = append(sb, onDevice(uint64(1e9+i*10_000_000)))
	}
	a := side(t, "A", "a.jsonl", batch(bench, sa...))
	b := side(t, "B", "b.jsonl", batch(bench, sb...))
	ph := phaseOf(t, diff(t, a, b), "decode")
	if len(ph.Moves) != 1 || ph.Moves[0].From != "CPU" || ph.Moves[0].To != "Vulkan0" || fmt.Sprint(ph.Moves[0].Layers) != "[0 1]" || ph.Moves[0].Nodes != 4 {
		t.Errorf("moves %+v, want layers 0–1 from the CPU to Vulkan0", ph.Moves)
	}
	dev := rowOf(ph, "", "b")
	if dev == nil || dev.Kind != "device" || dev.BackendB != "Vulkan0" || dev.B < 1 {
		t.Errorf("device row %+v, want over 1 ms a token on B only", dev)
	}
	if mm := rowOf(ph, "MUL_MAT", "moved"); mm == nil || math.Abs(mm.A-2) > 0.01 || mm.B != 0 {
		t.Errorf("moved MUL_MAT %+v, want 2 ms a token on A's CPU", mm)
	}
	// B's step: 10 µs of graph and 100 µs of decode around it, then 1 ms of device work.
	if got := ph.B.PerUnitMS; math.Abs(got-1.110) > 0.001 {
		t.Errorf("B's decode %.3f ms a token, want 1.110: a step lasts until its device is done", got)
	}
}

// Steps without a traced graph are compared per token still, and the comparison says
// why the ops do not split the change.
func TestNoTracedGraph(t *testing.T) {
	var steps []*assemble.Step
	for i := range 20 {
		steps = append(steps, step(1, uint64(1e9+i*5_000_000), false, 3_000_000, layers(2, "q4_0", 500_000)...))
	}
	a := side(t, "A", "a.jsonl", run(bench, 1, 20, 0, func(int) []spec { return layers(2, "q4_0", 500_000) })...)
	b := side(t, "B", "b.jsonl", batch(bench, steps...))
	ph := phaseOf(t, diff(t, a, b), "decode")
	if len(ph.Notes) == 0 || !strings.Contains(ph.Notes[0], "no traced graph in decode on side B") {
		t.Errorf("notes %q", ph.Notes)
	}
	// The graphs are the same; B's 3 ms outside them is the change.
	if len(ph.Rows) != 2 || ph.Rows[1].Kind != "outside" || !ph.Rows[1].Beyond || math.Abs(ph.Rows[1].Change.Value-2.8) > 1e-6 ||
		ph.Rows[0].Kind != "graph" || ph.Rows[0].Beyond || !ph.Beyond || ph.Verdict != "slower" {
		t.Errorf("rows %+v, verdict %q", ph.Rows, ph.Verdict)
	}
}

// A new context's first graph (llama-bench's warm-up) is cold, ten times the later
// ones: its step is left out of its side, with its nodes, and the sides are the same.
func TestColdFirstGraph(t *testing.T) {
	graph := func(int) []spec { return layers(4, "q4_0", 500_000) }
	a := side(t, "A", "a.jsonl", run(bench, 1, 40, 0.1, graph)...)
	cold := step(1, 1e8, true, 200_000, layers(4, "q4_0", 5_000_000)...)
	cold.Graphs[0].First = true
	b := side(t, "B", "b.jsonl", append([]ptrace.Traces{batch(bench, cold)}, run(bench, 2, 40, 0.1, graph)...)...)
	ph := phaseOf(t, diff(t, a, b), "decode")
	if ph.B.Steps != 40 || ph.B.Cold != 1 || ph.B.TracedSteps != 40 || ph.Beyond {
		t.Errorf("B %+v; %s, %+.1f%%: want its 40 warm steps, the cold one left out, no change", ph.B, ph.Verdict, 100*ph.Relative.Value)
	}
}

// Prefill and decode are compared apart, and -phase keeps one.
func TestPhases(t *testing.T) {
	td := batch(bench, step(32, 1e9, true, 0, layers(2, "q4_0", 4_000_000)...), step(1, 2e9, true, 0, layers(2, "q4_0", 500_000)...))
	a, b := side(t, "A", "a.jsonl", td), side(t, "B", "b.jsonl", td)
	c := diff(t, a, b)
	if len(c.Phases) != 2 || c.Phases[0].Phase != "prefill" || c.Phases[1].Phase != "decode" {
		t.Fatalf("phases %+v", c.Phases)
	}
	if p := c.Phases[0]; p.Unit != "token" || p.A.Tokens != 32 || p.Change.Value != 0 || p.Beyond {
		t.Errorf("prefill %+v", p)
	}
	c, err := Diff(a, b, Options{Phase: "prefill"})
	if err != nil || len(c.Phases) != 1 {
		t.Errorf("-phase prefill: %v, %+v", err, c)
	}
	if _, err := Diff(a, b, Options{Phase: "encode"}); err == nil || !strings.Contains(err.Error(), "neither side computed the encode phase") {
		t.Errorf("-phase encode: %v", err)
	}
}

// A selection that takes nothing is an error naming why.
func TestSelectsNothing(t *testing.T) {
	other := &signals.Origin{PID: 12, VPID: 12, Exe: "/usr/bin/llama-server", Runtime: "llama.cpp"}
	tds := []ptrace.Traces{batch(bench, step(1, 1e9, true, 0, layers(1, "q4_0", 1000)...)),
		batch(other, step(1, 2e9, true, 0, layers(1, "q4_0", 1000)...))}
	ok := side(t, "B", "x.jsonl@pid=11", tds...)
	for _, tc := range []struct{ spec, want string }{
		{"x.jsonl@pid=99", "no process with pid 99 in its files; they hold llama-bench (pid 11), llama-server (pid 12)"},
		{"x.jsonl@exe=llama-cli", `no process running "llama-cli"`},
		{"x.jsonl@pid=11,from=1h", "no llama_decode or step span starts in from=1h"},
		{"x.jsonl", "2 processes computed steps in its files, llama-bench (pid 11), llama-server (pid 12): name one with @pid=N or @exe=NAME"},
	} {
		_, err := Diff(side(t, "A", tc.spec, tds...), ok, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "side A ("+tc.spec+")") {
			t.Errorf("%s: %v, want %q", tc.spec, err, tc.want)
		}
	}
	if _, err := Diff(side(t, "A", "x.jsonl"), ok, Options{}); err == nil || !strings.Contains(err.Error(), "no span of a profiled process in its files") {
		t.Errorf("empty side: %v", err)
	}
	// The same files, two processes: each side takes its own.
	c, err := Diff(side(t, "A", "x.jsonl@exe=llama-server", tds...), ok, Options{})
	if err != nil || c.A.Processes[0] != "llama-server (pid 12)" || c.B.Processes[0] != "llama-bench (pid 11)" {
		t.Errorf("two processes of one file: %v, %+v %+v", err, c.A, c.B)
	}
}

// A time range takes the steps that start in it, offsets counting from the first span.
func TestTimeRange(t *testing.T) {
	tds := run(bench, 1, 64, 0, func(i int) []spec {
		if i < 32 {
			return layers(2, "q4_0", 500_000)
		}
		return layers(2, "q4_0", 1_500_000)
	})
	// Each step takes about 1.3 ms then 3.3 ms, 50 µs apart: the 32nd starts by 44 ms.
	a := side(t, "A", "x.jsonl@to=40ms", tds...)
	b := side(t, "B", "x.jsonl@from=50ms", tds...)
	c := diff(t, a, b)
	ph := phaseOf(t, c, "decode")
	if ph.A.Steps+ph.B.Steps > 64 || ph.A.Steps < 25 || ph.B.Steps < 25 || ph.Verdict != "slower" {
		t.Errorf("A %+v, B %+v, verdict %q", ph.A, ph.B, ph.Verdict)
	}
	if len(c.Warnings) > 0 {
		t.Errorf("warnings %q", c.Warnings)
	}
	if !c.A.Last.Before(c.B.First) {
		t.Errorf("A ends %v, after B starts %v", c.A.Last, c.B.First)
	}
}

// The setup says what differs first, and unknown where a recording does not say.
func TestSetup(t *testing.T) {
	old := *bench
	old.LlamaBuild = 4000
	td := func(o *signals.Origin, threads int) ptrace.Traces {
		d := step(1, 1e9, true, 0, spec{op: "FLASH_ATTN_EXT", name: "fattn-0", ns: 1000},
			spec{op: "SET_ROWS", name: "cache_k_l0 (view)", ns: 1000})
		for _, g := range d.Graphs {
			g.NThreads = threads
		}
		return batch(o, d)
	}
	c := diff(t, side(t, "A", "a.jsonl", td(&old, 1)), side(t, "B", "b.jsonl", td(bench, 2)))
	items := map[string]SetupItem{}
	for _, it := range c.Setup {
		items[it.Key] = it
	}
	if it := c.Setup[0]; it.Key != keyGraphThreads || !it.Differs || it.A != "1" || it.B != "2" {
		t.Errorf("first item %+v, want the threads, differing", it)
	}
	if it := items["llama.build.number"]; it.A != "4000" || it.B != unknown || it.Differs {
		t.Errorf("build %+v, want 4000 vs unknown, not said to differ", it)
	}
	if it := items[keyFlash]; !strings.HasPrefix(it.A, "on") || it.Differs {
		t.Errorf("flash attention %+v", it)
	}
	if it := items[keyKV]; it.A != "K f32, V unknown" {
		t.Errorf("KV cache %+v", it)
	}
}

// A context's settings are compared per phase, as the sets of values each side's decodes
// used: llama-bench makes a context per test, sized for it, so the same run twice
// differs in none, whichever context was live when profinfer attached (the resource's).
func TestContextSettings(t *testing.T) {
	ctx := func(n, ubatch int) ggml.Params { return ggml.Params{Size: n, Threads: 2, Batch: n, Ubatch: ubatch} }
	// bench runs llama-bench's tests: each prompt length's prefill, then a decode of 48,
	// each in a context of its own; attached names the context the resource has.
	benchRun := func(attached ggml.Params, ubatch int, prompts ...int) ptrace.Traces {
		o := *bench
		o.CtxSize, o.CtxBatch, o.CtxUbatch = attached.Size, attached.Batch, attached.Ubatch
		var steps []*assemble.Step
		at := uint64(1e9)
		for _, n := range prompts {
			d := step(n, at, true, 0, layers(1, "q4_0", 1000)...)
			d.Settings = ctx(n, min(n, ubatch))
			steps, at = append(steps, d), d.End+1000
		}
		for range 3 {
			d := step(1, at, true, 0, layers(1, "q4_0", 1000)...)
			d.Settings = ctx(48, min(48, ubatch))
			steps, at = append(steps, d), d.End+1000
		}
		return batch(&o, steps...)
	}
	items := func(c *Comparison) map[string]SetupItem {
		m := map[string]SetupItem{}
		for _, it := range c.Setup {
			m[it.Key] = it
		}
		return m
	}
	// The same run twice, attached during its prefill and during its decode.
	c := diff(t, side(t, "A", "a.jsonl", benchRun(ctx(16, 16), 512, 16)), side(t, "B", "b.jsonl", benchRun(ctx(48, 48), 512, 16)))
	for _, k := range contextKeys {
		if it := items(c)[k]; it.Differs || it.A != it.B {
			t.Errorf("the same run: %+v differs", it)
		}
	}
	if it := items(c)["llama.context.batch_size"]; it.A != "prefill 16, decode 48" {
		t.Errorf("batch size %+v, want each phase's", it)
	}
	if it := items(c)[keyGraphThreads]; it.Differs || it.A != it.B {
		t.Errorf("threads %+v, want the same on both sides", it)
	}
	// -ub 8 against the default: the prefill's ubatch differs, the rest does not.
	c = diff(t, side(t, "A", "a.jsonl", benchRun(ctx(16, 16), 512, 16)), side(t, "B", "b.jsonl", benchRun(ctx(16, 8), 8, 16)))
	if it := items(c)["llama.context.ubatch_size"]; !it.Differs || it.A != "prefill 16, decode 48" || it.B != "8" {
		t.Errorf("-ub 8: ubatch %+v, want prefill 16, decode 48 against 8, differing", it)
	}
	if it := items(c)["llama.context.batch_size"]; it.Differs {
		t.Errorf("-ub 8: batch %+v differs", it)
	}
	// Two prompt lengths: the prefill's context varies within the run, the same on both
	// sides, and differs from a run of one.
	c = diff(t, side(t, "A", "a.jsonl", benchRun(ctx(16, 16), 512, 16, 32)), side(t, "B", "b.jsonl", benchRun(ctx(32, 32), 512, 16, 32)))
	if it := items(c)["llama.context.size"]; it.Differs || it.A != "prefill 16 or 32 (varies within the run), decode 48" {
		t.Errorf("-p 16,32 twice: %+v", it)
	}
	c = diff(t, side(t, "A", "a.jsonl", benchRun(ctx(16, 16), 512, 16, 32)), side(t, "B", "b.jsonl", benchRun(ctx(16, 16), 512, 16)))
	if it := items(c)["llama.context.size"]; !it.Differs {
		t.Errorf("-p 16,32 against -p 16: %+v, want differing", it)
	}
}

func TestCompareSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    map[string][]int64
		ta, tb  string
		differs bool
	}{
		{"one context each, the same", map[string][]int64{"prefill": {512}, "decode": {512}}, map[string][]int64{"prefill": {512}, "decode": {512}}, "512", "512", false},
		{"a phase only one side computed is left out", map[string][]int64{"prefill": {16}, "decode": {48}}, map[string][]int64{"decode": {48}}, "48", "48", false},
		{"a set against a value", map[string][]int64{"prefill": {16, 32}}, map[string][]int64{"prefill": {16}}, "16 or 32 (varies within the run)", "16", true},
		{"no phase in common", map[string][]int64{"prefill": {16}}, map[string][]int64{"decode": {48}}, "16", "48", false},
		{"an older recording", map[string][]int64{"decode": {48}}, map[string][]int64{}, "48", "", false},
	} {
		ta, tb, differs := compareSettings(tc.a, tc.b)
		if ta != tc.ta || tb != tc.tb || differs != tc.differs {
			t.Errorf("%s: %q, %q, %v; want %q, %q, %v", tc.name, ta, tb, differs, tc.ta, tc.tb, tc.differs)
		}
	}
}

func TestDifferentModels(t *testing.T) {
	a := side(t, "A", "a.jsonl", batch(bench, step(1, 1e9, true, 0, layers(1, "q4_0", 1000)...)))
	b := side(t, "B", "b.jsonl", batch(bench, step(1, 1e9, true, 0, layers(1, "q4_0", 1000)...)))
	a.agg.Traces(resourced(batch(bench, step(1, 3e9, false, 0)), "llama.model.name", "Llama-3.2-1B"))
	b.agg.Traces(resourced(batch(bench, step(1, 3e9, false, 0)), "llama.model.name", "Qwen3-0.6B"))
	c := diff(t, a, b)
	if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], "different models (llama.model.name Llama-3.2-1B vs Qwen3-0.6B)") {
		t.Errorf("warnings %q", c.Warnings)
	}
}

func resourced(td ptrace.Traces, k, v string) ptrace.Traces {
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(k, v)
	return td
}

// A node renamed between releases, the only one of its op, weights and layer left on
// each side, is the same node; one with no counterpart stays on its side.
func TestRenamed(t *testing.T) {
	graph := func(out string, kq bool) func(int) []spec {
		return func(int) []spec {
			s := []spec{{op: "MUL_MAT", name: out + "-0", weight: "q4_0", ns: 300_000}, {op: "MUL_MAT", name: "ffn_up-0", weight: "q4_0", ns: 300_000}}
			if kq {
				s = append(s, spec{op: "MUL_MAT", name: "kq-0", weight: "f16", ns: 50_000})
			}
			return s
		}
	}
	a := side(t, "A", "a.jsonl", run(bench, 1, 20, 0, graph("kqv_out", true))...)
	b := side(t, "B", "b.jsonl", run(bench, 2, 20, 0, graph("attn_out", false))...)
	ph := phaseOf(t, diff(t, a, b), "decode")
	if r := rowOf(ph, "MUL_MAT", "both"); r == nil || r.Nodes != 2 || fmt.Sprint(r.Tensors) != "[attn_out-# ffn_up-# kqv_out-#]" {
		t.Errorf("matmuls on both sides: %+v", r)
	}
	if r := rowOf(ph, "MUL_MAT", "a"); r == nil || r.WeightA != "f16" || r.Nodes != 1 {
		t.Errorf("kq only in A: %+v", r)
	}
}

// A device that timed its nodes has its splits' time divided among them by its own
// times, and no row of its work whole.
func TestDeviceTimed(t *testing.T) {
	offload := func(start uint64, mm uint64) *assemble.Step {
		d := step(1, start, true, 100_000, spec{op: "GET_ROWS", name: "inp_embd", weight: "f32", ns: 10_000})
		timed := []assemble.TimedNode{
			{Info: spec{op: "MUL_MAT", name: "ffn_up-0", weight: "q4_0"}.info(), NS: mm, Known: true},
			{Info: spec{op: "ADD", name: "ffn_out-0"}.info(), NS: 100_000, Known: true},
		}
		d.Splits = []assemble.Split{{TID: 1, Backend: "Vulkan0", NNodes: 2, Start: d.End - 50_000, End: d.End - 40_000,
			Device: true, Done: d.End - 50_000 + 2*(mm+100_000), Wait: mm, Nodes: []*assemble.NodeInfo{timed[0].Info, timed[1].Info}, Timed: timed}}
		return d
	}
	var sa, sb []*assemble.Step
	for i := range 20 {
		sa = append(sa, offload(uint64(1e9+i*10_000_000), 400_000))
		sb = append(sb, offload(uint64(1e9+i*10_000_000), 1_400_000))
	}
	ph := phaseOf(t, diff(t, side(t, "A", "a.jsonl", batch(bench, sa...)), side(t, "B", "b.jsonl", batch(bench, sb...))), "decode")
	mm := rowOf(ph, "MUL_MAT", "both")
	// The split lasts twice the device's own time: 1 ms of 1.2 ms more, split 4:1 and 14:1.
	if mm == nil || mm.BackendA != "Vulkan0" || math.Abs(mm.A-0.8) > 0.001 || math.Abs(mm.B-2.8) > 0.001 || !mm.Beyond || ph.Rows[0].Op != "MUL_MAT" {
		t.Errorf("device matmul %+v; rows %+v", mm, ph.Rows)
	}
	for _, r := range ph.Rows {
		if r.Kind == "device" {
			t.Errorf("a row of the device's work whole beside its timed nodes: %+v", r)
		}
	}
}
