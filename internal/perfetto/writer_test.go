package perfetto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/perfcount"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/signals"
)

const (
	hostile    = `</script><img src=x onerror=alert(1)>`
	badUTF8    = "blk.\xff\xfe-1 \"q\"\n"
	epoch      = 1_760_000_000_123_456_789 // a wall-clock time, ns
	threads    = 4
	overlapNS  = 1500 // node spans overlap their successor by this, leaving the barrier
	decodeTID  = 1234
	serverPID  = 4242
	nodeTokens = 7
)

func counters(t testing.TB) *signals.Counters {
	var cs []perfcount.Counter
	for _, n := range []string{"task-clock", "cycles", "instructions", "cache-misses"} {
		c, err := perfcount.Parse(n)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return signals.NewCounters(cs)
}

// decode builds a llama_decode as profinfer assembles it: a scheduler call, a CPU split,
// a tensor copy and a traced graph of n nodes run by 4 threads, each node reading the one
// before (so the critical path is a long chain), overlapping the next by 1.5 µs, with
// per-thread busy times and perf counters. start is monotonic ns.
func decode(start uint64, n int) *assemble.Step {
	g := &assemble.Graph{TID: decodeTID, NNodes: n, NThreads: threads, Traced: true}
	t := start + 30_000
	g.Start = t - 1000
	for i := 0; i < n; i++ {
		dur := uint64(3000 + 1711*(i%7))
		name := fmt.Sprintf("ffn_out-%d", i/10)
		switch i % 50 {
		case 3:
			name = hostile
		case 4:
			name = badUTF8
		}
		nd := &assemble.Node{
			Tensor: uint64(i + 1),
			Info: &assemble.NodeInfo{Op: []string{"MUL_MAT", "ADD", "RMS_NORM", "ROPE", "SOFT_MAX"}[i%5], Name: name, Type: "f32",
				Shape: [4]int64{4096, 7, 1, 1}, Srcs: []assemble.Src{assemble.NewSrc("q4_0", [4]int64{4096, 4096, 1, 1})},
				Work: roofline.Work{FLOPs: 2e8, Bytes: 9e6}, Reads: []uint64{uint64(i), 1 << 40}},
			Start: t, End: t + dur + overlapNS,
			Counted: threads,
		}
		nd.Counters[0], nd.Counters[1], nd.Counters[2], nd.Counters[3] = dur*threads, 9000, 12000, 40
		for ith := 0; ith < threads; ith++ {
			s := t + uint64(ith*100)
			nd.Threads = append(nd.Threads, assemble.ThreadTime{Ith: ith, Start: s, Busy: s + dur - uint64(ith*300), End: t + dur + overlapNS - uint64(ith*10)})
		}
		g.Nodes = append(g.Nodes, nd)
		t += dur
	}
	g.End = t + overlapNS + 500
	return &assemble.Step{
		TID: decodeTID, Tokens: nodeTokens, Start: start, End: g.End + 20_000,
		Splits: []assemble.Split{{TID: decodeTID, Backend: "CPU", NNodes: n, Start: g.Start - 100, End: g.End + 100}},
		Copies: []assemble.Copy{{TID: decodeTID, Src: "CPU", Dst: "RPC", Tensor: hostile, Bytes: 4096, Start: start + 2000, End: start + 3000}},
		Graphs: []*assemble.Graph{g},
	}
}

// batch returns the spans of one decode by each of two processes with the same pid on
// two hosts.
func batch(t testing.TB, start uint64, n int) ptrace.Traces {
	s := signals.NewSpans(signals.Clock{Offset: epoch}, true, roofline.Peaks{FLOPS: 100e9, Bandwidth: 20e9}, counters(t))
	td := ptrace.NewTraces()
	p := &signals.Origin{PID: serverPID, VPID: 1, Exe: "/usr/bin/llama-server",
		Model: &model.Info{Name: "Tiny " + hostile + "\xc3", Architecture: "llama"}}
	s.Step(td, p, decode(start, n))
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("host.name", "host-a")
	other := *p // the other host's process: an origin of its own
	s.Step(td, &other, decode(start+5000, n))
	td.ResourceSpans().At(1).Resource().Attributes().PutStr("host.name", "host-b")
	return td
}

// doc is a parsed document.
type doc struct {
	TraceEvents []struct {
		Ph, Name, Cat string
		Pid, Tid      int64
		Ts, Dur       json.Number
		ID            uint64
		Args          map[string]any
	}
	OtherData map[string]string
}

func parse(t *testing.T, b []byte) doc {
	t.Helper()
	var d doc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return d
}

func write(t *testing.T, f func(w *Writer) error) []byte {
	t.Helper()
	var out bytes.Buffer
	w := NewWriter(&out)
	if err := f(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(bytes.NewReader(out.Bytes())); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return out.Bytes()
}

func TestWriter(t *testing.T) {
	const n = 120
	out := write(t, func(w *Writer) error {
		if err := w.Traces(batch(t, 1e9, n)); err != nil {
			return err
		}
		return w.Traces(batch(t, 2e9, n)) // a second batch: same tracks, named once
	})
	if bytes.Contains(out, []byte("<")) || bytes.Contains(out, []byte(">")) {
		t.Error("raw < or > in the document")
	}
	d := parse(t, out)
	origin, err := strconv.ParseInt(d.OtherData["ts_origin_unix_ns"], 10, 64)
	if err != nil {
		t.Fatalf("otherData %v", d.OtherData)
	}

	procs := map[int64]string{}
	threadNames := map[string]int{}
	byName := map[string]int{}
	flows := 0
	var tokensPerS []float64
	perf := map[string]int{}
	clamped, hostileSeen, replaced := 0, 0, 0
	for _, e := range d.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				procs[e.Pid] = e.Args["name"].(string)
			} else {
				threadNames[e.Args["name"].(string)]++
			}
		case "X":
			byName[e.Name]++
			if e.Args["perfetto.clamped_ns"] != nil {
				clamped++
			}
			switch e.Args["ggml.tensor.name"] {
			case hostile:
				if e.Cat != "ggml.worker" {
					hostileSeen++
				}
			case "blk.\uFFFD\uFFFD-1 \"q\"\n":
				if e.Cat != "ggml.worker" {
					replaced++
				}
			}
			if e.Name == "llama_decode" && e.Pid == serverPID {
				// Exact to the nanosecond: the decodes start 1e9 and 2e9 ns after the offset.
				us := func(ns int64) string { return fmt.Sprintf("%d.%03d", ns/1000, ns%1000) }
				if ts := string(e.Ts); ts != us(epoch+1e9-origin) && ts != us(epoch+2e9-origin) {
					t.Errorf("decode ts %s, want %s or %s", ts, us(epoch+1e9-origin), us(epoch+2e9-origin))
				}
			}
		case "s":
			flows++
		case "C":
			if e.Name == "llama tokens/s" {
				tokensPerS = append(tokensPerS, e.Args["prefill"].(float64))
			}
			if strings.HasPrefix(e.Name, "perf.") || e.Name == "ggml.counters.ipc" {
				perf[e.Name]++
			}
		}
	}

	if len(procs) != 2 || !strings.Contains(procs[serverPID], "llama-server pid 4242 (Tiny "+hostile+"\uFFFD) on host-a") {
		t.Errorf("processes %v", procs)
	}
	for pid, name := range procs {
		if pid != serverPID && (pid < remapBase || !strings.Contains(name, "pid 4242") || !strings.HasSuffix(name, "on host-b")) {
			t.Errorf("second process %d %q", pid, name)
		}
	}
	// Both processes, two batches each.
	for name, want := range map[string]int{"llama_decode": 4, "ggml.backend.graph_compute": 4,
		"ggml.backend.tensor_copy": 4, "ggml.graph_compute": 4, "MUL_MAT": 4 * n / 5 * threads} { // node slices and 3 workers'
		if byName[name] != want {
			t.Errorf("%d %s slices, want %d", byName[name], name, want)
		}
	}
	if threadNames["thread 1234"] != 2 || threadNames["ggml worker ith 3 (graph thread 1234)"] != 2 || threadNames["ggml worker ith 4 (graph thread 1234)"] != 0 {
		t.Errorf("thread names %v", threadNames)
	}
	if clamped < 4*(n-1) {
		t.Errorf("%d clamped node slices, want at least %d", clamped, 4*(n-1))
	}
	// The tensor copy names the hostile tensor too; every fiftieth node does.
	if hostileSeen != 4*(1+(n+46)/50) || replaced != 4*((n+45)/50) {
		t.Errorf("%d hostile names, %d with U+FFFD", hostileSeen, replaced)
	}
	// Every node reads the one before: the critical path is all n of them.
	if flows != 4*(n-1) {
		t.Errorf("%d flows, want %d", flows, 4*(n-1))
	}
	if len(tokensPerS) != 4 || math.Abs(tokensPerS[0]-nodeTokens/(float64(decode(1e9, n).End-1e9)/1e9)) > 1e-6 {
		t.Errorf("tokens/s %v", tokensPerS)
	}
	// Four counters and IPC per node, and each brought to 0 after each graph.
	for _, k := range []string{"perf.task_clock", "perf.cycles", "perf.instructions", "perf.cache_misses", "ggml.counters.ipc"} {
		if perf[k] != 4*(n+1) {
			t.Errorf("%d %s counter events, want %d", perf[k], k, 4*(n+1))
		}
	}
}

// TestClampNeeded shows that the spans themselves do not nest: written as they are,
// Check finds the overlap the Writer clamps away.
func TestClampNeeded(t *testing.T) {
	td := batch(t, 1e9, 10)
	var b []byte
	b = append(b, `{"traceEvents":[{"ph":"M","name":"process_name","pid":1,"args":{"name":"p"}},{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"t"}}`...)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		sp := spans.At(i)
		b = append(b, `,{"ph":"X","name":"n","pid":1,"tid":1,"ts":`...)
		b = appendMicros(b, int64(sp.StartTimestamp())-epoch)
		b = append(b, `,"dur":`...)
		b = appendMicros(b, int64(sp.EndTimestamp()-sp.StartTimestamp()))
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	if err := Check(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Fatalf("Check of unclamped spans: %v", err)
	}
}

// TestClampIntoGraph gives a graph nodes that start before it, end after it or lie
// wholly after it, with busy times longer than the nodes: all are drawn inside it,
// whether the graph span comes before its nodes in the batch or after.
func TestClampIntoGraph(t *testing.T) {
	for _, graphLast := range []bool{false, true} {
		t.Run(fmt.Sprint("graph last ", graphLast), func(t *testing.T) { clampIntoGraph(t, graphLast) })
	}
}

func clampIntoGraph(t *testing.T, graphLast bool) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("process.pid", 9)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	add := func(name string, id byte, start, end uint64) ptrace.Span {
		sp := spans.AppendEmpty()
		sp.SetName(name)
		sp.SetSpanID(pcommon.SpanID{id})
		sp.SetParentSpanID(pcommon.SpanID{1})
		sp.SetStartTimestamp(pcommon.Timestamp(epoch + start))
		sp.SetEndTimestamp(pcommon.Timestamp(epoch + end))
		return sp
	}
	add("ggml.graph_compute", 1, 1000, 2000).Attributes().PutInt("thread.id", 5)
	for i, se := range [][2]uint64{{900, 1200}, {1100, 1150}, {1500, 2100}, {2050, 2200}} {
		a := add("MUL_MAT", byte(i+2), se[0], se[1]).Attributes()
		a.PutBool("ggml.critical_path", true)
		a.PutEmptySlice("ggml.thread.busy_ns").FromRaw([]any{5000, 5000})
	}
	if graphLast {
		spans.At(0).CopyTo(spans.AppendEmpty())
		first := true
		spans.RemoveIf(func(ptrace.Span) bool { f := first; first = false; return f })
	}
	out := write(t, func(w *Writer) error { return w.Traces(td) })
	var got []string
	for _, e := range parse(t, out).TraceEvents {
		if e.Ph == "X" || e.Ph == "s" || e.Ph == "f" {
			got = append(got, fmt.Sprintf("%s %d %s+%s", e.Ph, e.Tid, e.Ts, e.Dur))
		}
	}
	// The fourth node is empty at the graph's end, so the critical path skips it.
	want := []string{"X 5 60123457.789+1.000",
		"X 5 60123457.789+0.100", "X 1077936133 60123457.789+0.100",
		"X 5 60123457.889+0.050", "X 1077936133 60123457.889+0.050", "s 5 60123457.839+", "f 5 60123457.914+",
		"X 5 60123458.289+0.500", "X 1077936133 60123458.289+0.500", "s 5 60123457.914+", "f 5 60123458.539+",
		"X 5 60123458.789+0.000"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestStreams checks that each batch is written when it comes, and that per-batch state
// does not outlive it.
func TestStreams(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	for i := 0; i < 3; i++ {
		before := out.Len()
		if err := w.Traces(batch(t, uint64(i+1)*1e9, 20)); err != nil {
			t.Fatal(err)
		}
		if out.Len() <= before {
			t.Fatalf("batch %d not written before Close", i)
		}
		if len(w.nodes) != 0 || len(w.glist) != 2 || len(w.procs) != 2 {
			t.Errorf("state after batch %d: %d nodes, %d graphs, %d processes", i, len(w.nodes), len(w.glist), len(w.procs))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Error("second Close succeeded")
	}
	if err := w.Traces(ptrace.NewTraces()); err == nil {
		t.Error("Traces after Close succeeded")
	}
	if err := Check(&out); err != nil {
		t.Fatal(err)
	}
}

// TestOrphans writes node-like spans whose graph is not in the batch, overlapping and
// nested, over two batches: they share one track and still nest.
func TestOrphans(t *testing.T) {
	mk := func(spans [][2]uint64) ptrace.Traces {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt("process.pid", 7)
		ss := rs.ScopeSpans().AppendEmpty().Spans()
		for i, s := range spans {
			sp := ss.AppendEmpty()
			sp.SetName("MUL_MAT")
			sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
			sp.SetParentSpanID(pcommon.SpanID{0xee})
			sp.SetStartTimestamp(pcommon.Timestamp(epoch + s[0]))
			sp.SetEndTimestamp(pcommon.Timestamp(epoch + s[1]))
		}
		return td
	}
	out := write(t, func(w *Writer) error {
		if err := w.Traces(mk([][2]uint64{{100, 200}, {150, 300}, {120, 130}, {400, 500}})); err != nil {
			return err
		}
		return w.Traces(mk([][2]uint64{{450, 600}, {50, 60}}))
	})
	n := 0
	for _, e := range parse(t, out).TraceEvents {
		if e.Ph == "X" {
			n++
			if e.Tid != orphanTID {
				t.Errorf("orphan on tid %d", e.Tid)
			}
		}
	}
	if n != 6 {
		t.Errorf("%d slices", n)
	}
}

func TestMetrics(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutInt("process.pid", serverPID)
	rm.Resource().Attributes().PutStr("service.name", "llama-server")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	m := ms.AppendEmpty()
	m.SetName("llama.decode.tokens")
	sum := m.SetEmptySum()
	for _, ph := range []string{"prefill", "decode"} {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(epoch)
		dp.SetIntValue(42)
		dp.Attributes().PutStr("llama.phase", ph)
	}
	m = ms.AppendEmpty()
	m.SetName("ggml.op.count") // not charted
	m.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(1)
	own := md.ResourceMetrics().AppendEmpty() // profinfer's own, with no process
	m = own.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("profinfer.events.dropped")
	dp := m.SetEmptySum().DataPoints().AppendEmpty()
	dp.SetTimestamp(epoch)
	dp.SetIntValue(3)

	out := write(t, func(w *Writer) error { return w.Metrics(md) })
	series := map[string]float64{}
	names := map[int64]string{}
	for _, e := range parse(t, out).TraceEvents {
		switch e.Ph {
		case "C":
			for k, v := range e.Args {
				series[fmt.Sprintf("%d %s %s", e.Pid, e.Name, k)] = v.(float64)
			}
		case "M":
			names[e.Pid] = e.Args["name"].(string)
		}
	}
	want := map[string]float64{"4242 llama.decode.tokens prefill": 42, "4242 llama.decode.tokens decode": 42,
		fmt.Sprint(remapBase+1, " profinfer.events.dropped value"): 3}
	if fmt.Sprint(series) != fmt.Sprint(want) || names[remapBase+1] != "process" || names[serverPID] != "llama-server pid 4242" {
		t.Errorf("series %v, processes %v", series, names)
	}
}

func TestAppendMicros(t *testing.T) {
	for ns, want := range map[int64]string{0: "0.000", 1: "0.001", 999: "0.999", 1000: "1.000", 1234567: "1234.567", -1: "-0.001", -1500: "-1.500",
		epoch: "1760000000123456.789"} {
		if got := string(appendMicros(nil, ns)); got != want {
			t.Errorf("appendMicros(%d) = %s, want %s", ns, got, want)
		}
	}
}

// FuzzAppendString checks that any string becomes valid JSON that decodes as
// encoding/json's own encoding of it does.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "MUL_MAT", hostile, badUTF8, "\x00\x1f\x7f", "\u2028\u2029", "é€𝄞", "\xed\xa0\x80", "a\\b\"c", "\xf0\x9f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		if !json.Valid(b) {
			t.Fatalf("%q: invalid JSON %s", s, b)
		}
		if bytes.ContainsAny(b, "<>&\u2028\u2029") {
			t.Fatalf("%q: unescaped %s", s, b)
		}
		ref, _ := json.Marshal(s)
		var got, want string
		if json.Unmarshal(b, &got) != nil || json.Unmarshal(ref, &want) != nil || got != want {
			t.Fatalf("%q: decodes to %q, want %q", s, got, want)
		}
	})
}

// A device's work on two splits that one wait ended: both on the device's track beside
// the thread that handed them over, past the decode's end, the later one starting where
// the earlier ends; the document passes the checks.
func TestDeviceTrack(t *testing.T) {
	s := signals.NewSpans(signals.Clock{Offset: epoch}, false, roofline.Peaks{}, nil)
	td := ptrace.NewTraces()
	d := &assemble.Step{TID: decodeTID, Tokens: 1, Start: 1e9, End: 1e9 + 50_000,
		Splits: []assemble.Split{
			{TID: decodeTID, Backend: "VK", NNodes: 3, Start: 1e9 + 1000, End: 1e9 + 2000, Device: true, Done: 1e9 + 90_000, Bound: true,
				Nodes: []*assemble.NodeInfo{{Op: "MUL_MAT", Name: "ffn_up-0", Type: "f32"}}},
			{TID: decodeTID, Backend: "VK", NNodes: 3, Start: 1e9 + 3000, End: 1e9 + 4000, Device: true, Done: 1e9 + 90_000, Wait: 40_000},
		},
		Copies: []assemble.Copy{{TID: decodeTID, Src: "CPU", Dst: "VK", Tensor: "inp_pos", Bytes: 4, Start: 1e9 + 500, End: 1e9 + 900, Queued: true}}}
	s.Step(td, &signals.Origin{PID: serverPID, Exe: "/usr/bin/llama-server"}, d)
	var device []int
	b := write(t, func(w *Writer) error { return w.Traces(td) })
	for i, ev := range parse(t, b).TraceEvents {
		if ev.Ph == "X" && ev.Name == "ggml.device.compute" {
			device = append(device, i)
			if ev.Tid != deviceTID(decodeTID) || ev.Cat != "device" {
				t.Errorf("device slice on track %d, category %q", ev.Tid, ev.Cat)
			}
		}
	}
	evs := parse(t, b).TraceEvents
	if len(device) != 2 || evs[device[1]].Args["perfetto.clamped_ns"] == nil {
		t.Fatalf("device slices %v: want two, the second clamped", device)
	}
	// The queued copy flows from the thread into the first device slice, only.
	var flows []string
	for _, ev := range evs {
		if ev.Cat == "ggml.copy" {
			flows = append(flows, fmt.Sprintf("%s %d %s", ev.Ph, ev.Tid, ev.Ts))
		}
	}
	if len(flows) != 2 || !strings.HasPrefix(flows[0], fmt.Sprintf("s %d ", decodeTID)) || !strings.HasPrefix(flows[1], fmt.Sprintf("f %d ", deviceTID(decodeTID))) {
		t.Errorf("copy flows %v", flows)
	}
}
