package compare

import "strings"

// A phase's steps are summed into time-ordered blocks of consecutive steps, and its
// traced graphs into blocks of consecutive traced graphs: the units the bootstrap
// resamples. Consecutive graphs are correlated (a window of tracing, a neighbour's burst,
// the KV cache growing), so a block keeps them together, and a run that drifts is
// resampled as its blocks, not as if every step were independent. At maxBlocks blocks,
// neighbours merge and each block holds twice the steps: a series holds between
// maxBlocks/2 and maxBlocks blocks however long it ran.
const maxBlocks = 64

// block sums consecutive steps of a phase, or consecutive traced graphs.
type block struct {
	tokens, steps int64     // the steps', or those of the traced graphs' steps
	seconds       float64   // the steps' time, or the traced graphs'
	cells         []float64 // seconds by identity (the phase's table index)
}

func (b *block) add(id int32, secs float64) {
	if int(id) >= len(b.cells) {
		b.cells = append(b.cells, make([]float64, int(id)+1-len(b.cells))...)
	}
	b.cells[id] += secs
}

func (b *block) merge(o *block) {
	b.tokens += o.tokens
	b.steps += o.steps
	b.seconds += o.seconds
	for id, s := range o.cells {
		b.add(int32(id), s)
	}
}

// series is a phase's blocks: step or graph n (counted from 0, in the order they came)
// is in block n/size.
type series struct {
	blocks []*block
	size   int64
	n      int64
}

// next numbers a new step or graph.
func (s *series) next() int64 {
	if s.size == 0 {
		s.size = 1
	}
	if s.n/s.size >= maxBlocks {
		merged := s.blocks[:0]
		for i := 0; i < len(s.blocks); i += 2 {
			b := s.blocks[i]
			if i+1 < len(s.blocks) {
				b.merge(s.blocks[i+1])
			}
			merged = append(merged, b)
		}
		clear(s.blocks[len(merged):])
		s.blocks = merged
		s.size *= 2
	}
	s.n++
	return s.n - 1
}

// at returns step n's block.
func (s *series) at(n int64) *block {
	i := int(n / s.size)
	for len(s.blocks) <= i {
		s.blocks = append(s.blocks, &block{})
	}
	return s.blocks[i]
}

// kind is what an identity's time is: a node's, a device's splits', copies' or the CPU
// graphs'.
type kind uint8

const (
	kindNode   kind = iota // a node of a traced CPU graph, or of a device's split
	kindDevice             // a device's splits, from each handing over until seen done
	kindCopy               // tensor copies from one backend to another
	kindGraph              // CPU graphs, traced or not
)

// idKey is what aligns a node across the sides: what the model computed, not how. The
// weights' type, the shape and the node's position in its graph may differ between the
// sides and are not in it: a change of quantisation is one node whose weights changed,
// and attention's shapes, which grow with the KV cache, do not split a node in many.
type idKey struct {
	kind    kind
	backend string // a copy's: source→destination
	op      string // with its fused op: RMS_NORM+MUL
	stem    string // the tensor's name without its numbers: Qcur-#, cache_k_l# (view)
	layer   int32  // -1: none
}

// ident is one aligned node of one side, and what it was seen with.
type ident struct {
	key    idKey
	weight string // the weights' type, matmuls' and row reads'
	mixed  bool   // more than one weight type seen
	calls  int64
	shape  [4]int64
	vary   uint8 // dimensions seen to change (the KV cache's length)
	shaped bool
	// onDevice: a device computed it, so its time is counted over every step (a device's
	// splits are timed in every step), not over the traced ones.
	onDevice bool
}

func (d *ident) see(weight string, shape []int64) {
	d.calls++
	if d.calls == 1 {
		d.weight = weight
	} else if weight != d.weight {
		d.mixed = true
	}
	if len(shape) == 0 {
		return
	}
	var s [4]int64
	copy(s[:], shape)
	if !d.shaped {
		d.shape, d.shaped = s, true
		return
	}
	for i := range s {
		if s[i] != d.shape[i] {
			d.vary |= 1 << i
		}
	}
}

// sameShape says whether two sides' nodes have the same shape but where either saw a
// dimension change.
func sameShape(a, b *ident) bool {
	if !a.shaped || !b.shaped {
		return true
	}
	for i := range a.shape {
		if (a.vary|b.vary)&(1<<i) == 0 && a.shape[i] != b.shape[i] {
			return false
		}
	}
	return true
}

// Bounds on a phase's identities: a 1B model has some 300 nodes a graph, a 70B some
// 1600; past maxIdents, nodes are kept by op alone.
const (
	maxIdents   = 4096
	maxOverflow = 256
)

type table struct {
	ids  map[idKey]int32
	list []ident
}

// id returns k's index, past the bounds that of its op's, or of "other".
func (t *table) id(k idKey) int32 {
	if i, ok := t.ids[k]; ok {
		return i
	}
	if len(t.list) >= maxIdents {
		k = idKey{kind: k.kind, backend: k.backend, op: k.op, layer: -1}
		if i, ok := t.ids[k]; ok {
			return i
		}
		if len(t.list) >= maxIdents+maxOverflow {
			k = idKey{kind: k.kind, op: "other", layer: -1}
			if i, ok := t.ids[k]; ok {
				return i
			}
		}
	}
	if t.ids == nil {
		t.ids = map[idKey]int32{}
	}
	i := int32(len(t.list))
	t.ids[k] = i
	t.list = append(t.list, ident{key: k})
	return i
}

// stem is a tensor's name with each run of digits made #: Qcur-12 and Qcur-3 are one
// node in different layers (the layer is in the key apart), node_27 and node_31 are
// unnamed nodes whose numbers shift from build to build.
func stem(name string) string {
	if !strings.ContainsAny(name, "0123456789") {
		return name
	}
	var b strings.Builder
	digits := false
	for _, r := range name {
		d := r >= '0' && r <= '9'
		if d && !digits {
			b.WriteByte('#')
		} else if !d {
			b.WriteRune(r)
		}
		digits = d
	}
	return b.String()
}
