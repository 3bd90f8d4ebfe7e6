package viewexporter // import "github.com/profinfer/profinfer/viewexporter"

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/compare"
	"github.com/profinfer/profinfer/internal/summary"
)

// maxSides bounds the comparison's memory: a side takes about 2 MB made and 4.4 MB after
// an hour of llama-bench, its rings of span ids full, and no more after two
// (TestSideMemory); a marked process keeps two. Past it the least recently seen
// process's sides go first.
const maxSides = 16

// sides keeps, per process the view shows, a compare.Side fed the same pdata as the
// summary, and after a mark the side before it: api/compare compares two processes, or
// one before and after its mark, as `profinfer compare` compares two recordings.
type sides struct {
	mu    sync.Mutex // guards procs: the pipelines fold while a request compares
	procs map[string]*procSides
	now   func() time.Time // marks and last seen; tests set it
}

// procSides are one process's sides: cur takes what it computes since the view first saw
// it, or since its latest mark; before is what cur held at the mark, kept as it was.
type procSides struct {
	pid         int64
	cur, before *compare.Side
	mark        time.Time
	lastSeen    time.Time
}

func newSides() *sides { return &sides{procs: map[string]*procSides{}, now: time.Now} }

// processID is the summary's id of a resource's process, so that a side answers to the
// id api/view gives the process, and its pid. A resource without a pid, the receiver's
// own, has none.
func processID(attrs pcommon.Map) (id string, pid int64) {
	id, p := summary.ProcessID(attrs)
	pid, _ = strconv.ParseInt(p, 10, 64)
	return id, pid
}

// process returns the sides of a resource's process, making them; nil for a resource
// without a pid.
func (s *sides) process(attrs pcommon.Map) *procSides {
	id, pid := processID(attrs)
	if pid <= 0 {
		return nil
	}
	p := s.procs[id]
	if p == nil {
		p = &procSides{pid: pid, cur: compare.NewSide("A", compare.Selection{Spec: "all the view saw", PID: pid})}
		s.procs[id] = p
		s.makeRoom(p)
	}
	p.lastSeen = s.now()
	return p
}

// makeRoom forgets the least recently seen processes, keep aside, until the sides fit.
func (s *sides) makeRoom(keep *procSides) {
	for {
		n := 0
		var oldest *procSides
		var oldestID string
		for id, p := range s.procs {
			n++
			if p.before != nil {
				n++
			}
			if p != keep && (oldest == nil || p.lastSeen.Before(oldest.lastSeen)) {
				oldest, oldestID = p, id
			}
		}
		if n <= maxSides || oldest == nil {
			return
		}
		delete(s.procs, oldestID)
	}
}

// traces folds each resource's spans into its process's current side; a side before a
// mark takes nothing more.
func (s *sides) traces(td ptrace.Traces, cutoff time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		p := s.process(rss.At(i).Resource().Attributes())
		if p == nil {
			continue
		}
		one := td
		if rss.Len() > 1 { // a side takes its own process's resources alone
			one = ptrace.NewTraces()
			rss.At(i).CopyTo(one.ResourceSpans().AppendEmpty())
		}
		errs = append(errs, p.cur.Traces(one))
	}
	s.expire(cutoff)
	return errors.Join(errs...)
}

func (s *sides) metrics(md pmetric.Metrics, cutoff time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		p := s.process(rms.At(i).Resource().Attributes())
		if p == nil {
			continue
		}
		one := md
		if rms.Len() > 1 {
			one = pmetric.NewMetrics()
			rms.At(i).CopyTo(one.ResourceMetrics().AppendEmpty())
		}
		errs = append(errs, p.cur.Metrics(one))
	}
	s.expire(cutoff)
	return errors.Join(errs...)
}

// expire forgets the processes the summary forgets: those last seen before cutoff.
func (s *sides) expire(cutoff time.Time) {
	for id, p := range s.procs {
		if p.lastSeen.Before(cutoff) {
			delete(s.procs, id)
		}
	}
}

// markProcess starts a new side of the process from now; what its side held is kept as
// the side before the mark. Steps that started before the mark but reach the view after
// it (an export batch in flight) count in neither.
func (s *sides) markProcess(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[id]
	if p == nil {
		return time.Time{}, false
	}
	at := s.now().UTC()
	p.before, p.mark = p.cur, at
	p.before.Sel.Spec = "before the mark at " + at.Format(time.TimeOnly) + " UTC"
	p.cur = compare.NewSide("B", compare.Selection{Spec: "since the mark at " + at.Format(time.TimeOnly) + " UTC", PID: p.pid,
		From: compare.Bound{Given: at.Format(time.RFC3339Nano), At: at}})
	s.makeRoom(p)
	return at, true
}

// sideInfo is a process with sides, as api/sides lists it.
type sideInfo struct {
	ID   string    `json:"id"`            // the process's id in api/view
	Mark time.Time `json:"mark,omitzero"` // its latest mark
}

func (s *sides) list() []sideInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []sideInfo{}
	for id, p := range s.procs {
		out = append(out, sideInfo{id, p.mark})
	}
	return out
}

// side returns a process's side: its current one, or with part "before" the one before
// its mark.
func (s *sides) side(id, part string) (*compare.Side, error) {
	p := s.procs[id]
	switch {
	case p == nil:
		return nil, errors.New("no such process among those the view keeps for comparing (it exited over an hour ago, or more recent ones took its place)")
	case part == "":
		return p.cur, nil
	case part == "before" && p.before != nil:
		return p.before, nil
	case part == "before":
		return nil, errors.New("the process has no mark: nothing before one")
	}
	return nil, fmt.Errorf("part %q: want before, or none", part)
}

// compare compares side b against side a, each a process id and a part.
func (s *sides) compare(a, aPart, b, bPart, phase string) (*compare.Comparison, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sa, err := s.side(a, aPart)
	if err != nil {
		return nil, http.StatusNotFound, fmt.Errorf("side A: %w", err)
	}
	sb, err := s.side(b, bPart)
	if err != nil {
		return nil, http.StatusNotFound, fmt.Errorf("side B: %w", err)
	}
	if sa == sb {
		return nil, http.StatusBadRequest, errors.New("A and B are the same side: pick two")
	}
	sa.Name, sb.Name = "A", "B" // a side is A in one comparison and B in another
	c, err := compare.Diff(sa, sb, compare.Options{Phase: phase})
	if err != nil {
		return nil, http.StatusUnprocessableEntity, err
	}
	return c, http.StatusOK, nil
}

// route serves the comparison: GET api/sides lists the processes that have sides and
// their marks, GET api/compare?a=ID&b=ID[&a_part=before][&b_part=before][&phase=P]
// returns the Comparison (docs/compare.md), and POST api/mark?id=ID marks a process.
func (s *sides) route(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/sides", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"sides": s.list()})
	})
	mux.HandleFunc("GET /api/compare", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("a") == "" || q.Get("b") == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "name two processes: a=ID&b=ID, the ids api/view gives them"})
			return
		}
		c, status, err := s.compare(q.Get("a"), q.Get("a_part"), q.Get("b"), q.Get("b_part"), q.Get("phase"))
		if err != nil {
			writeJSON(w, status, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, status, c)
	})
	mux.HandleFunc("POST /api/mark", func(w http.ResponseWriter, r *http.Request) {
		// A header no form can send: another site's page cannot mark without a preflight,
		// which this server does not answer.
		if r.Header.Get("X-Profinfer-Mark") == "" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a mark needs the X-Profinfer-Mark header"})
			return
		}
		at, ok := s.markProcess(r.URL.Query().Get("id"))
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such process among those the view keeps for comparing"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]time.Time{"mark": at})
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
