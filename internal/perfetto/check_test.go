package perfetto

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// names makes the tracks of pid 1 tids 1 and 2 named.
const names = `{"ph":"M","name":"process_name","pid":1,"args":{"name":"p"}},
{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"t"}},
{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"u"}}`

func doc1(events string) string {
	return `{"displayTimeUnit":"ns","traceEvents":[` + names + "," + events + `]}`
}

func TestCheckGood(t *testing.T) {
	for name, d := range map[string]string{
		"empty":  `{"traceEvents":[]}`,
		"nested": doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1.000,"dur":10},{"ph":"X","name":"b","pid":1,"tid":1,"ts":1,"dur":10},{"ph":"X","name":"c","pid":1,"tid":1,"ts":2.5,"dur":1.5},{"ph":"X","name":"d","pid":1,"tid":1,"ts":11,"dur":0}`),
		// Ends meeting starts, and slices on another track overlapping freely.
		"adjacent": doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"X","name":"b","pid":1,"tid":1,"ts":2,"dur":1},{"ph":"X","name":"c","pid":1,"tid":2,"ts":1.5,"dur":1}`),
		"flow": doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"X","name":"b","pid":1,"tid":2,"ts":3,"dur":5},{"ph":"X","name":"c","pid":1,"tid":1,"ts":1.5,"dur":1},
			{"ph":"s","cat":"c","name":"f","id":7,"pid":1,"tid":1,"ts":4,"bp":"e"},{"ph":"f","cat":"c","name":"f","id":7,"pid":1,"tid":2,"ts":7.999,"bp":"e"}`),
		"counter": doc1(`{"ph":"C","name":"c","pid":1,"ts":3,"args":{"a":1.5,"b":-2}}`),
		// Nanoseconds past a float64's reach at epoch microseconds still nest exactly.
		"epoch": doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1760000000123456.789,"dur":0.002},{"ph":"X","name":"b","pid":1,"tid":1,"ts":1760000000123456.791,"dur":0.001}`),
	} {
		if err := Check(strings.NewReader(d)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckBad(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"not JSON", `{"traceEvents":[`, "EOF"},
		{"array", `[]`, "not a JSON object"},
		{"no events", `{"displayTimeUnit":"ns"}`, "no traceEvents"},
		{"trailing", `{"traceEvents":[]} {}`, "data after"},
		{"time unit", `{"displayTimeUnit":"us","traceEvents":[]}`, "displayTimeUnit"},
		{"invalid UTF-8", doc1(`{"ph":"X","name":"a` + "\xff" + `","pid":1,"tid":1,"ts":1,"dur":1}`), "UTF-8"},
		{"cut rune", `{"traceEvents":[],"otherData":"` + "\xe2\x82" + `"}`, "UTF-8"},
		{"no dur", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1}`), `dur : want`},
		{"no tid", doc1(`{"ph":"X","name":"a","pid":1,"ts":1,"dur":1}`), `tid , ts`},
		{"string ts", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":"1","dur":1}`), "event 3"},
		{"negative dur", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":-1}`), "dur"},
		{"no name", doc1(`{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1}`), "without a name"},
		{"overlap", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2},{"ph":"X","name":"b","pid":1,"tid":1,"ts":2.999,"dur":0.002}`), "overlaps"},
		// By a nanosecond, where float64 microseconds would not tell.
		{"epoch overlap", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1760000000123456.789,"dur":0.002},{"ph":"X","name":"b","pid":1,"tid":1,"ts":1760000000123456.790,"dur":0.002}`), "overlaps"},
		{"no process name", `{"traceEvents":[{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"t"}},{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1}]}`, "no process_name"},
		{"no thread name", doc1(`{"ph":"X","name":"a","pid":1,"tid":3,"ts":1,"dur":1}`), "no thread_name"},
		{"metadata without name", doc1(`{"ph":"M","name":"process_name","pid":2,"args":{}}`), "args.name"},
		{"counter string", doc1(`{"ph":"C","name":"c","pid":1,"ts":1,"args":{"a":"1"}}`), "want numbers"},
		{"counter empty", doc1(`{"ph":"C","name":"c","pid":1,"ts":1,"args":{}}`), "want numbers"},
		{"flow outside", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":1.5,"bp":"e"},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":2.001,"bp":"e"}`), "in no slice"},
		{"flow other track", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":1.5,"bp":"e"},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":2,"ts":2,"bp":"e"}`), "in no slice"},
		{"flow at start", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"X","name":"b","pid":1,"tid":1,"ts":2,"dur":1},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":2},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":4,"bp":"e"}`), "where a slice starts"},
		{"flow at end", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":2},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":6,"bp":"e"}`), "in no slice"},
		{"flow unpaired", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":1.5,"bp":"e"}`), "0 ends"},
		{"flow id reused", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":1.5},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":2,"bp":"e"},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":3},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":4,"bp":"e"}`), "2 starts"},
		{"flow backwards", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":3},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":2,"bp":"e"}`), "ends before"},
		{"flow unbound", doc1(`{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"s","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":1.5},{"ph":"f","cat":"c","name":"f","id":1,"pid":1,"tid":1,"ts":2}`), "bp"},
	} {
		err := Check(strings.NewReader(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestCheckReads checks the UTF-8 check across reads that cut runes, one byte at a time.
func TestCheckReads(t *testing.T) {
	good := doc1(`{"ph":"X","name":"é€𝄞","pid":1,"tid":1,"ts":1,"dur":1}`)
	if err := Check(iotest.OneByteReader(strings.NewReader(good))); err != nil {
		t.Errorf("good: %v", err)
	}
	bad := strings.Replace(good, "€", "\xe2\x82", 1)
	if err := Check(iotest.OneByteReader(strings.NewReader(bad))); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("bad: %v", err)
	}
}

// TestCheckTestdata checks the documents under testdata: good-*.json pass, bad-*.json
// fail.
func TestCheckTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		err = Check(r)
		r.Close()
		if good := strings.HasPrefix(filepath.Base(f), "good-"); good != (err == nil) {
			t.Errorf("%s: Check = %v", f, err)
		}
	}
}
