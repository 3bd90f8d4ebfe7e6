package perfetto

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Check reads a Chrome Trace Event Format document and reports what would make a viewer
// misdraw it: invalid JSON or UTF-8, X events without pid, tid, ts or dur, slices on a
// track that overlap without nesting, flows whose ends are not strictly inside a slice
// of their track or are not paired, counters without numeric values, and tracks with slices but
// no process_name or thread_name. It keeps every slice's extent in memory.
func Check(r io.Reader) error {
	u := &utf8Reader{r: bufio.NewReaderSize(r, 1<<16)}
	dec := json.NewDecoder(u)
	dec.UseNumber()
	c := checker{tracks: map[track][]extent{}, procs: map[int64]bool{}, threads: map[track]bool{}, flows: map[string]*flowEnds{}}
	err := c.document(dec)
	if u.err != nil {
		return u.err
	}
	if err != nil {
		return err
	}
	return c.finish()
}

type track struct{ pid, tid int64 }

type extent struct{ start, end int64 } // ns

type flowEnds struct {
	cat, name string
	s, f      int
	sAt, fAt  point
}

type flowPoint struct {
	point
	id string
}

type point struct {
	track
	ts int64
}

type checker struct {
	tracks  map[track][]extent
	procs   map[int64]bool // with a process_name
	threads map[track]bool // with a thread_name
	flows   map[string]*flowEnds
	points  []flowPoint
	events  int
	errs    []error
}

// event holds the fields Check looks at.
type event struct {
	Ph   string          `json:"ph"`
	Name *string         `json:"name"`
	Cat  string          `json:"cat"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Ts   json.RawMessage `json:"ts"`
	Dur  json.RawMessage `json:"dur"`
	ID   json.RawMessage `json:"id"`
	Bp   string          `json:"bp"`
	Args json.RawMessage `json:"args"`
}

func (c *checker) fail(format string, args ...any) {
	if len(c.errs) < 20 {
		c.errs = append(c.errs, fmt.Errorf("event %d: "+format, append([]any{c.events}, args...)...))
	}
}

// document reads the top-level object, checking each event as it comes.
func (c *checker) document(dec *json.Decoder) error {
	if t, err := dec.Token(); err != nil {
		return fmt.Errorf("perfetto: not JSON: %w", err)
	} else if t != json.Delim('{') {
		return errors.New("perfetto: not a JSON object")
	}
	seen := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("perfetto: %w", err)
		}
		switch t {
		case "traceEvents":
			seen = true
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return fmt.Errorf("perfetto: traceEvents is not an array (%v)", err)
			}
			for dec.More() {
				var e event
				if err := dec.Decode(&e); err != nil {
					return fmt.Errorf("perfetto: event %d: %w", c.events, err)
				}
				c.event(&e)
				c.events++
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("perfetto: %w", err)
			}
		case "displayTimeUnit":
			var u string
			if err := dec.Decode(&u); err != nil || (u != "ns" && u != "ms") {
				return fmt.Errorf("perfetto: displayTimeUnit %q is neither ns nor ms (%v)", u, err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("perfetto: %v: %w", t, err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("perfetto: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("perfetto: data after the document")
	}
	if !seen {
		return errors.New("perfetto: no traceEvents")
	}
	return nil
}

func (c *checker) event(e *event) {
	if e.Name == nil && e.Ph != "E" {
		c.fail("%q event without a name", e.Ph)
		return
	}
	pid, okPid := intNumber(e.Pid)
	tid, okTid := intNumber(e.Tid)
	ts, okTs := nanos(e.Ts)
	switch e.Ph {
	case "X":
		dur, okDur := nanos(e.Dur)
		if !okPid || !okTid || !okTs || !okDur || dur < 0 {
			c.fail("X %q: pid %s, tid %s, ts %s, dur %s: want numbers, dur not negative", *e.Name, e.Pid, e.Tid, e.Ts, e.Dur)
			return
		}
		k := track{pid, tid}
		c.tracks[k] = append(c.tracks[k], extent{ts, ts + dur})
	case "M":
		if *e.Name != "process_name" && *e.Name != "thread_name" {
			return
		}
		var args struct{ Name *string }
		if err := json.Unmarshal(e.Args, &args); err != nil || args.Name == nil || !okPid {
			c.fail("%s without pid or args.name", *e.Name)
			return
		}
		if *e.Name == "process_name" {
			c.procs[pid] = true
		} else if okTid {
			c.threads[track{pid, tid}] = true
		} else {
			c.fail("thread_name without tid")
		}
	case "C":
		var args map[string]json.RawMessage
		if err := json.Unmarshal(e.Args, &args); err != nil || len(args) == 0 || !okPid || !okTs {
			c.fail("counter %q: pid %s, ts %s, args %s: want numbers (%v)", *e.Name, e.Pid, e.Ts, e.Args, err)
			return
		}
		for k, v := range args {
			if _, ok := number(v); !ok {
				c.fail("counter %q: %s is %s: want numbers", *e.Name, k, v)
			}
		}
	case "s", "t", "f":
		if !okPid || !okTid || !okTs || len(e.ID) == 0 {
			c.fail("flow %q: pid %s, tid %s, ts %s, id %s", *e.Name, e.Pid, e.Tid, e.Ts, e.ID)
			return
		}
		if e.Ph == "f" && e.Bp != "e" {
			c.fail("flow end %s does not bind to its enclosing slice (bp %q)", e.ID, e.Bp)
		}
		key := e.Cat + "\x00" + string(e.ID)
		fl := c.flows[key]
		if fl == nil {
			fl = &flowEnds{cat: e.Cat, name: *e.Name}
			c.flows[key] = fl
		}
		if fl.name != *e.Name {
			c.fail("flow %s is named %q and %q", e.ID, fl.name, *e.Name)
		}
		p := point{track{pid, tid}, ts}
		switch e.Ph {
		case "s":
			fl.s++
			fl.sAt = p
		case "f":
			fl.f++
			fl.fAt = p
		}
		c.points = append(c.points, flowPoint{p, string(e.ID)}) // steps too
	}
}

// finish checks what needs every event: nesting, flows, names.
func (c *checker) finish() error {
	ends := map[track][]int64{} // per track, the latest end among slices sorted by start
	for k, xs := range c.tracks {
		slices.SortFunc(xs, func(a, b extent) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end)) })
		if err := nested(xs); err != nil {
			c.errs = append(c.errs, fmt.Errorf("pid %d tid %d: %w", k.pid, k.tid, err))
		}
		m := make([]int64, len(xs))
		for i, x := range xs {
			m[i] = x.end
			if i > 0 {
				m[i] = max(m[i], m[i-1])
			}
		}
		ends[k] = m
		if !c.procs[k.pid] {
			c.errs = append(c.errs, fmt.Errorf("pid %d has slices but no process_name", k.pid))
			c.procs[k.pid] = true
		}
		if !c.threads[k] {
			c.errs = append(c.errs, fmt.Errorf("pid %d tid %d has slices but no thread_name", k.pid, k.tid))
		}
	}
	// A flow binds to the slice open at its ts: one must hold it strictly, with no slice
	// starting at it, as viewers may take events at the same ts in either order.
	for _, p := range c.points {
		xs := c.tracks[p.track]
		i := lastStarting(xs, p.ts-1)
		switch {
		case i < 0 || ends[p.track][i] <= p.ts:
			c.errs = append(c.errs, fmt.Errorf("flow %s at %d ns on pid %d tid %d is in no slice", p.id, p.ts, p.pid, p.tid))
		case i+1 < len(xs) && xs[i+1].start == p.ts:
			c.errs = append(c.errs, fmt.Errorf("flow %s at %d ns on pid %d tid %d is where a slice starts", p.id, p.ts, p.pid, p.tid))
		}
	}
	for id, fl := range c.flows {
		switch {
		case fl.s != 1 || fl.f != 1:
			c.errs = append(c.errs, fmt.Errorf("flow %q has %d starts and %d ends, want one of each", id, fl.s, fl.f))
		case fl.fAt.ts < fl.sAt.ts:
			c.errs = append(c.errs, fmt.Errorf("flow %q ends before it starts", id))
		}
	}
	if len(c.errs) > 20 {
		c.errs = append(c.errs[:20], errors.New("more errors left out"))
	}
	return errors.Join(c.errs...)
}

// lastStarting returns the index of the last extent of xs starting at or before ts, or -1.
func lastStarting(xs []extent, ts int64) int {
	i, _ := slices.BinarySearchFunc(xs, ts+1, func(x extent, t int64) int { return cmp.Compare(x.start, t) })
	return i - 1
}

// nested checks that extents, sorted by start and then longest first, nest or follow
// one another: none starts inside another and ends after it.
func nested(xs []extent) error {
	var open []extent
	for _, x := range xs {
		for len(open) > 0 && open[len(open)-1].end <= x.start {
			open = open[:len(open)-1]
		}
		if k := len(open); k > 0 && x.end > open[k-1].end {
			p := open[k-1]
			return fmt.Errorf("slice [%d, %d] ns overlaps slice [%d, %d] ns without nesting in it", x.start, x.end, p.start, p.end)
		}
		open = append(open, x)
	}
	return nil
}

// number returns raw if it is a JSON number; encoding/json would take a string holding
// one too, which viewers do not all accept.
func number(raw json.RawMessage) (json.Number, bool) {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return "", false
	}
	return json.Number(raw), true
}

// intNumber reads an integer id.
func intNumber(raw json.RawMessage) (int64, bool) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	return v, err == nil && len(raw) > 0 && raw[0] != '"'
}

// nanos reads microseconds as integer nanoseconds: exactly for plain decimals, which a
// float64 would round at today's epoch microseconds.
func nanos(raw json.RawMessage) (int64, bool) {
	n, ok := number(raw)
	if !ok {
		return 0, false
	}
	s := string(n)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	whole, frac, _ := cutByte(s, '.')
	if len(frac) > 3 {
		frac = frac[:3] // sub-nanosecond digits: truncated
	}
	if w, err := strconv.ParseUint(whole, 10, 63); err == nil && len(whole) > 0 && w <= math.MaxInt64/1000 {
		f := uint64(0)
		for i := 0; i < 3; i++ {
			f *= 10
			if i < len(frac) {
				if frac[i] < '0' || frac[i] > '9' {
					goto float
				}
				f += uint64(frac[i] - '0')
			}
		}
		v := int64(w*1000 + f)
		if neg {
			v = -v
		}
		return v, true
	}
float: // exponents and the like
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.Abs(f) > math.MaxInt64/1000 {
		return 0, false
	}
	return int64(math.Round(f * 1000)), true
}

func cutByte(s string, c byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// utf8Reader fails a read of bytes that are not UTF-8, which encoding/json would
// silently replace but other parsers reject.
type utf8Reader struct {
	r    io.Reader
	tail []byte // an incomplete rune at the end of the last read
	off  int64
	err  error
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	b := p[:n]
	// Complete the rune the last read cut.
	for len(u.tail) > 0 && len(b) > 0 {
		u.tail = append(u.tail, b[0])
		b = b[1:]
		if utf8.FullRune(u.tail) {
			if !utf8.Valid(u.tail) {
				return n, u.fail()
			}
			u.tail = u.tail[:0]
		}
	}
	// Keep an incomplete rune at the end for the next read.
	end := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				end = i
			}
			break
		}
	}
	if !utf8.Valid(b[:end]) {
		return n, u.fail()
	}
	u.tail = append(u.tail, b[end:]...)
	u.off += int64(n)
	if err == io.EOF && len(u.tail) > 0 {
		return n, u.fail()
	}
	return n, err
}

func (u *utf8Reader) fail() error {
	u.err = fmt.Errorf("perfetto: invalid UTF-8 in the %d bytes after byte %d", utf8.UTFMax, u.off)
	return u.err
}
