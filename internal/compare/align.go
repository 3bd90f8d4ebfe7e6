package compare

import (
	"cmp"
	"slices"
	"strings"
)

// group is a row's nodes on each side: indexes into the sides' phase tables.
type group struct {
	row  Row
	a, b []int32
}

// loosePasses pair the nodes an exact key left: a node moved to another backend keeps
// its name; a renamed one must be the only one of its op, weights and layer on each side.
var loosePasses = []struct {
	key    func(d *ident) (idKey, bool)
	unique bool
}{
	{key: func(d *ident) (idKey, bool) {
		k := d.key
		k.backend = ""
		return k, k.kind == kindNode
	}},
	{key: func(d *ident) (idKey, bool) { // the weights' type in the name's place
		return idKey{kind: d.key.kind, backend: d.key.backend, op: d.key.op, stem: weightOf(d), layer: d.key.layer},
			d.key.kind == kindNode && d.key.layer >= 0
	}, unique: true},
}

// side returns the group's nodes on side A (a) or B.
func (g *group) side(a bool) []int32 {
	if a {
		return g.a
	}
	return g.b
}

// groupKey is what a row is: the nodes of one op, on one backend on each side, reading
// weights of one type on each side, present on both sides or on one.
type groupKey struct {
	kind                       kind
	backendA, backendB, op     string
	weightA, weightB, presence string
}

// align pairs each node of A with B's: the same op, tensor and layer on the same backend
// ("both"); else on another backend ("moved": a layer offloaded); else, where it is the
// one node of its op, weights' type and layer left on each side, under another name (a
// release renamed kqv_out-# attn_out-#); else it is on one side only. Paired nodes whose
// weights' type differs make one row ("MUL_MAT q4_0 → f16").
func align(ta, tb *table) []*group {
	pairB := make([]bool, len(tb.list))
	var pairs [][2]int32 // -1: absent on that side
	var lone []int32
	for i, d := range ta.list {
		if j, ok := tb.ids[d.key]; ok {
			pairs = append(pairs, [2]int32{int32(i), j})
			pairB[j] = true
		} else {
			lone = append(lone, int32(i))
		}
	}
	// Then by a looser key each time, among the nodes left.
	for _, p := range loosePasses {
		left := map[idKey][]int32{}
		for j := range tb.list {
			if k, ok := p.key(&tb.list[j]); ok && !pairB[j] {
				left[k] = append(left[k], int32(j))
			}
		}
		inA := map[idKey]int{}
		for _, i := range lone {
			if k, ok := p.key(&ta.list[i]); ok {
				inA[k]++
			}
		}
		var still []int32
		for _, i := range lone {
			k, ok := p.key(&ta.list[i])
			js := left[k]
			if !ok || len(js) == 0 || p.unique && (len(js) != 1 || inA[k] != 1) {
				still = append(still, i)
				continue
			}
			pairs = append(pairs, [2]int32{i, js[0]})
			pairB[js[0]] = true
			left[k] = js[1:]
		}
		lone = still
	}
	for _, i := range lone {
		pairs = append(pairs, [2]int32{i, -1})
	}
	for j := range tb.list {
		if !pairB[j] {
			pairs = append(pairs, [2]int32{-1, int32(j)})
		}
	}
	byKey := map[groupKey]*group{}
	var groups []*group
	for _, p := range pairs {
		var da, db *ident
		if p[0] >= 0 {
			da = &ta.list[p[0]]
		}
		if p[1] >= 0 {
			db = &tb.list[p[1]]
		}
		k := keyOf(da, db)
		g := byKey[k]
		if g == nil {
			g = &group{row: Row{Kind: kindNames[k.kind], Op: k.op, BackendA: k.backendA, BackendB: k.backendB,
				WeightA: k.weightA, WeightB: k.weightB, Presence: k.presence}}
			byKey[k] = g
			groups = append(groups, g)
		}
		if k.kind == kindNode {
			g.row.Nodes++
		}
		for _, d := range []*ident{da, db} {
			if d == nil {
				continue
			}
			if d.key.layer >= 0 && !slices.Contains(g.row.Layers, int(d.key.layer)) {
				g.row.Layers = append(g.row.Layers, int(d.key.layer))
			}
			if d.key.stem != "" && !slices.Contains(g.row.Tensors, d.key.stem) && len(g.row.Tensors) < maxTensors {
				g.row.Tensors = append(g.row.Tensors, d.key.stem)
			}
		}
		if da != nil && db != nil && !sameShape(da, db) {
			g.row.ShapesDiffer++
		}
		if da != nil {
			g.a = append(g.a, p[0])
		}
		if db != nil {
			g.b = append(g.b, p[1])
		}
	}
	for _, g := range groups {
		slices.Sort(g.row.Layers)
		slices.Sort(g.row.Tensors)
	}
	return groups
}

// maxTensors bounds the tensors a row names.
const maxTensors = 8

var kindNames = map[kind]string{kindNode: "op", kindDevice: "device", kindCopy: "copy", kindGraph: "graph"}

func keyOf(da, db *ident) groupKey {
	var k groupKey
	for _, d := range []*ident{da, db} {
		if d != nil {
			k.kind, k.op = d.key.kind, d.key.op
		}
	}
	if da != nil {
		k.backendA, k.weightA = da.key.backend, weightOf(da)
	}
	if db != nil {
		k.backendB, k.weightB = db.key.backend, weightOf(db)
	}
	switch {
	case da == nil:
		k.presence = "b"
	case db == nil:
		k.presence = "a"
	case da.key.backend != db.key.backend:
		k.presence = "moved"
	default:
		k.presence = "both"
	}
	return k
}

func weightOf(d *ident) string {
	if d.mixed {
		return "mixed"
	}
	return d.weight
}

// moves sums the nodes that moved backend, by where from and where to.
func moves(groups []*group) []Move {
	var out []Move
	for _, g := range groups {
		if g.row.Presence != "moved" {
			continue
		}
		i := slices.IndexFunc(out, func(m Move) bool { return m.From == g.row.BackendA && m.To == g.row.BackendB })
		if i < 0 {
			out = append(out, Move{From: g.row.BackendA, To: g.row.BackendB})
			i = len(out) - 1
		}
		m := &out[i]
		m.Nodes += g.row.Nodes
		for _, l := range g.row.Layers {
			if !slices.Contains(m.Layers, l) {
				m.Layers = append(m.Layers, l)
			}
		}
	}
	for i := range out {
		slices.Sort(out[i].Layers)
	}
	slices.SortFunc(out, func(x, y Move) int {
		return cmp.Or(cmp.Compare(y.Nodes, x.Nodes), strings.Compare(x.From+x.To, y.From+y.To))
	})
	return out
}
