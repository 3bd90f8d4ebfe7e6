// Package describe names, types and shapes the nodes of one GGML process from the raw
// tensor copies its node probes send, and costs them for the roofline. It keeps what it
// learnt, so that a graph repeated every token costs lookups, not decodes.
package describe

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/events"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/roofline"
)

// maxInfos bounds each cache of descriptions by detail bytes; shapes that grow with the
// context (KV views) add entries, and a long-running server fills it, to start over.
const maxInfos = 4096

// detailKey identifies a node's detail bytes (some 550 of them) by two independent 64-bit
// hashes: the cache keeps 16 bytes an entry rather than the bytes, half of what an entry
// took, and two details that differ collide with a chance of 2^-128.
type detailKey [2]uint64

var detailSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func keyOf(detail []byte) detailKey {
	return detailKey{maphash.Bytes(detailSeeds[0], detail), maphash.Bytes(detailSeeds[1], detail)}
}

// maxKnown bounds the descriptions kept by tensor: a known node met without one has every
// graph described again.
const maxKnown = 65536

// known is a node's tensor, and whether a fused kernel started it.
type known struct {
	tensor uint64
	fused  uint16
}

// Describer describes the nodes of one process. It is not safe for concurrent use.
type Describer struct {
	target *ggml.Target
	// infos caches descriptions by the raw detail bytes, for plain and fused starts.
	infos [2]map[detailKey]*assemble.NodeInfo
	// known holds the description last sent for each node's tensor: while the process
	// reuses a graph, thread 0 sends its nodes' detail once per build (probe.Remember).
	known map[known]*assemble.NodeInfo
	asked bool // a known node was met without a description, and all were asked again
	t     ggml.Tensor
}

// New returns a describer for a process whose ggml is target.
func New(target *ggml.Target) *Describer {
	return &Describer{target: target, infos: [2]map[detailKey]*assemble.NodeInfo{{}, {}}, known: map[known]*assemble.NodeInfo{}}
}

// Node describes the node ev (a Node or NodeDetail) starts: from its detail, or for a
// known node from the detail last sent for its tensor. askAgain says that a known node
// came without one (its detail record was lost, or the cache was cleared): the caller has
// the process send every node's detail again. It is said once until a detail comes.
func (d *Describer) Node(ev *events.Event) (info *assemble.NodeInfo, askAgain bool) {
	key := known{ev.TensorAddr(), ev.Flags & events.FlagFused}
	if ev.Kind == events.Node {
		info = d.known[key]
		if info == nil && !d.asked {
			d.asked = true
			return nil, true
		}
		return info, false
	}
	d.asked = false
	if len(d.known) >= maxKnown {
		clear(d.known)
	}
	info = d.detail(ev)
	d.known[key] = info
	return info, false
}

// First describes the first node of the graph a StepEnter event begins; nil where the
// probe could not read one.
func (d *Describer) First(ev *events.Event) *assemble.NodeInfo {
	if allZero(ev.Tensor) {
		return nil
	}
	return d.detail(ev)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Copy returns the name and size of the tensor a Copy event moves.
func (d *Describer) Copy(ev *events.Event) (name string, bytes int64) {
	d.target.Layout.Tensor(ev.Tensor, &d.t)
	return string(d.t.Name), d.target.NBytes(&d.t)
}

// detail decodes a node's detail, through the cache of descriptions by detail bytes.
func (d *Describer) detail(ev *events.Event) *assemble.NodeInfo {
	fused := ev.Flags & events.FlagFused
	cache := d.infos[fused]
	key := keyOf(ev.Detail)
	if info, ok := cache[key]; ok {
		return info
	}
	l, names, t := &d.target.Layout, &d.target.Names, &d.t
	l.Tensor(ev.Tensor, t)
	info := &assemble.NodeInfo{
		Op:    names.Op(t.Op, t.OpParam),
		Name:  string(t.Name),
		Type:  names.Type(t.Type),
		Shape: t.Ne,
	}
	var srcs [events.NumSrc]roofline.Shape
	n := 0
	for i, raw := range ev.Src {
		if t.Src[i] == 0 {
			break
		}
		typ, ne := l.SrcHead(raw)
		info.Srcs = append(info.Srcs, assemble.NewSrc(names.Type(typ), ne))
		srcs[n] = d.shape(typ, ne)
		n++
	}
	for i, src := range t.Src {
		if src == 0 {
			continue
		}
		if i < events.NumSrc { // ggml points view_src at the owner directly, never at a view
			if owner := binary.LittleEndian.Uint64(ev.SrcView[8*i:]); owner != 0 {
				src = owner
			}
		}
		info.Reads = append(info.Reads, src)
	}
	info.Owner = t.ViewSrc
	info.Work = roofline.Cost(info.Op, d.shape(t.Type, t.Ne), srcs[:n])
	if fused != 0 {
		info.FusedOp = "MUL" // the only fused CPU kernel: ggml_compute_forward_rms_norm_mul_fused
	}
	if len(cache) >= maxInfos {
		clear(cache)
	}
	cache[key] = info
	return info
}

func (d *Describer) shape(typ uint32, ne [4]int64) roofline.Shape {
	size := d.target.Size(typ)
	return roofline.Shape{Ne: ne, Block: size.Block, BlockBytes: size.Bytes, Type: d.target.Names.Type(typ)}
}
