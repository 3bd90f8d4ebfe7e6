// Package compare answers "why did it get slower?" over two recordings: it folds each
// side (one or more of the file exporter's files, optionally one process and a time
// range of them) in bounded memory, aligns what the two computed node by node, and splits
// the change of each phase's time per token over the ops, each change with an interval
// from a block bootstrap over the side's steps, and a verdict that tells a change from
// the noise two runs of the same thing show. It says first what differs in the setup:
// builds, threads, batch sizes, the model, the machine.
//
// The Comparison it returns marshals to the JSON the command writes as compare.json;
// docs/compare.md describes it field by field.
package compare

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Comparison is side B measured against side A.
type Comparison struct {
	A SideInfo `json:"a"`
	B SideInfo `json:"b"`
	// Warnings are what makes the comparison compare different things: another model,
	// another machine, processes pooled. Said first.
	Warnings []string    `json:"warnings"`
	Setup    []SetupItem `json:"setup"` // those that differ first
	Phases   []PhaseDiff `json:"phases"`
	Method   Method      `json:"method"`
}

// SideInfo is what a side took.
type SideInfo struct {
	Name      string    `json:"name"` // A or B
	Selection Selection `json:"selection"`
	Processes []string  `json:"processes"` // "llama-bench (pid 1234)"
	First     time.Time `json:"first"`     // the first step taken's start
	Last      time.Time `json:"last"`      // the last one's end
}

// SetupItem is one thing of the setup on both sides, as text; "unknown" where a side's
// recording does not say.
type SetupItem struct {
	Key     string `json:"key"` // the resource attribute, or a derived name (docs/compare.md)
	Label   string `json:"label"`
	A       string `json:"a"`
	B       string `json:"b"`
	Differs bool   `json:"differs"` // both known, and not the same
}

// Method is how the intervals and verdicts were reached; each phase's noise floor is
// its own (PhaseDiff.Floor).
type Method struct {
	// A row's band adds MinShare of its phase's time per unit; FewGraphsShare where the
	// ops' split rests on fewer than 3 traced graphs on a side.
	MinShare       float64 `json:"min_share"`
	FewGraphsShare float64 `json:"few_graphs_share"`
	Confidence     float64 `json:"confidence"` // of the intervals
	Resamples      int     `json:"resamples"`  // of the block bootstrap
}

// PhaseDiff is one phase's time per unit (token, or step where the runtime counts no
// tokens), on each side, and its change split over what computed it.
type PhaseDiff struct {
	Phase string    `json:"phase"`
	Unit  string    `json:"unit"` // token or step
	A     PhaseSide `json:"a"`
	B     PhaseSide `json:"b"`
	// Change is B's ms per unit less A's; Relative is that over A's.
	Change   Estimate `json:"change_ms"`
	Relative Estimate `json:"relative"`
	// Floor is the relative change two recordings of the same thing show anyway (run to
	// run, on the same machine): a change is beyond noise when its interval lies wholly
	// beyond ±Floor of the larger side's time per unit.
	Floor float64 `json:"noise_floor"`
	// Noise is the change, ms per unit, its interval must lie wholly beyond: Floor of the
	// larger side's time.
	Noise   float64 `json:"noise_ms"`
	Beyond  bool    `json:"beyond_noise"`
	Verdict string  `json:"verdict"` // slower, faster, no change beyond noise, too few steps to tell, only in A/B
	// Rows split Change, largest first; the last is what the ops do not explain.
	Rows  []Row    `json:"rows"`
	Moves []Move   `json:"moves,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// PhaseSide is one side's steps of a phase.
type PhaseSide struct {
	Steps       int64   `json:"steps"`
	Tokens      int64   `json:"tokens"`
	Seconds     float64 `json:"seconds"`
	PerUnitMS   float64 `json:"ms_per_unit"`
	PerSecond   float64 `json:"units_per_second"`
	TracedSteps int64   `json:"traced_steps"` // with a traced graph: what node times are per unit of
	// Cold steps are left out: each computed a new context's first graph, a warm-up
	// whose first reads of the weights and buffers no later step pays (ggml.graph.first).
	Cold        int64 `json:"cold_steps,omitempty"`
	Blocks      int   `json:"blocks"`       // the bootstrap's blocks of steps
	GraphBlocks int   `json:"graph_blocks"` // and of traced graphs
}

// Estimate is a change with its interval.
type Estimate struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// Row is the part of a phase's change one kind of node (op, weight type, backend) made,
// or a device's splits, or copies between backends, or what no node explains.
type Row struct {
	Kind string `json:"kind"` // op, device, copy or outside
	Op   string `json:"op,omitempty"`
	// The backend on each side, as ggml names it; a copy's is source→destination. ""
	// on the side it is absent from.
	BackendA string `json:"backend_a,omitempty"`
	BackendB string `json:"backend_b,omitempty"`
	WeightA  string `json:"weight_a,omitempty"` // the weights' type, matmuls' and row reads'
	WeightB  string `json:"weight_b,omitempty"`
	// Presence: both, a (only in A), b (only in B), or moved (to another backend).
	Presence     string   `json:"presence"`
	Nodes        int      `json:"nodes"` // op rows: the nodes aligned in it (op, tensor and layer)
	Tensors      []string `json:"tensors,omitempty"`
	Layers       []int    `json:"layers,omitempty"`
	ShapesDiffer int      `json:"shapes_differ,omitempty"` // of its nodes on both sides
	A            float64  `json:"a_ms"`                    // ms per unit
	B            float64  `json:"b_ms"`
	Change       Estimate `json:"change_ms"`
	Share        float64  `json:"share"` // of the phase's change
	// Noise is the change, ms per unit, the row's interval must lie wholly beyond to be
	// Beyond: the phase's floor of the row's larger side, and Method.MinShare (or
	// FewGraphsShare) of the phase's time.
	Noise  float64 `json:"noise_ms"`
	Beyond bool    `json:"beyond_noise"`
}

// Move is nodes that ran on one backend in A and on another in B: layers offloaded.
type Move struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Layers []int  `json:"layers,omitempty"`
	Nodes  int    `json:"nodes"`
}

// Options tune a comparison; the zero value compares every phase with the calibrated
// floors.
type Options struct {
	Phase     string  // only this phase
	Floor     float64 // every phase's noise floor; 0: DefaultFloor's
	Resamples int     // 0: 2000
}

// DefaultFloor is a phase's noise floor, calibrated on pairs of llama-bench runs of the
// same thing on the test bench's 2-core VMs (docs/compare.md): their prefill, a few
// bursts of compute, differed by 22% (by llama-bench's own figures by 28%); their decode
// by 4%, halves of one run by 13%, and the VMs' runs by 15%, as their users see.
func DefaultFloor(phase string) float64 {
	if phase == "prefill" || phase == "mixed" { // a mixed decode is a prompt's chunk with others' next tokens
		return 0.25
	}
	return 0.15
}

// confidence of the intervals.
const confidence = 0.95

// phaseOrder is the order phases are shown in.
var phaseOrder = []string{"prefill", "encode", "decode", "mixed", "compute"}

// Diff compares side b against side a. It fails where a side took nothing (naming why),
// or where neither side computed the phase asked for.
func Diff(a, b *Side, opt Options) (*Comparison, error) {
	for _, s := range []*Side{a, b} {
		if err := s.check(); err != nil {
			return nil, err
		}
	}
	opt.Resamples = cmp.Or(opt.Resamples, 2000)
	fa, fb := a.facts(), b.facts()
	c := &Comparison{A: a.info(), B: b.info(), Warnings: warnings(a, b, fa, fb), Setup: setup(fa, fb),
		Method: Method{MinShare: minShare, FewGraphsShare: fewGraphsShare, Confidence: confidence, Resamples: opt.Resamples}}
	var names []string
	for _, s := range []*Side{a, b} {
		for name := range s.phases {
			if !slices.Contains(names, name) && (opt.Phase == "" || opt.Phase == name) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("-phase %s: neither side computed the %s phase (A: %s; B: %s)", opt.Phase, opt.Phase, a.phaseNames(), b.phaseNames())
	}
	slices.SortFunc(names, byOrder)
	for _, name := range names {
		c.Phases = append(c.Phases, diffPhase(name, a.phases[name], b.phases[name], opt))
	}
	return c, nil
}

func order(phase string) int {
	if i := slices.Index(phaseOrder, phase); i >= 0 {
		return i
	}
	return len(phaseOrder)
}

// byOrder sorts phase names in the order they are shown.
func byOrder(x, y string) int { return cmp.Or(cmp.Compare(order(x), order(y)), cmp.Compare(x, y)) }

func (s *Side) phaseNames() string {
	var names []string
	for name := range s.phases {
		names = append(names, name)
	}
	slices.SortFunc(names, byOrder)
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprint(names)
}

func (s *Side) info() SideInfo {
	var procs []string
	for _, p := range s.took {
		procs = append(procs, p.String())
	}
	slices.Sort(procs)
	return SideInfo{Name: s.Name, Selection: s.Sel, Processes: procs,
		First: time.Unix(0, s.first).UTC(), Last: time.Unix(0, s.last).UTC()}
}
