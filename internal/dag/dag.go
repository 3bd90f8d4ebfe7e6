// Package dag recovers the dependency graph of a traced GGML graph from the tensors its
// nodes read, and finds its critical path: the chain of dependent nodes that took longest.
//
// A node depends on the last node before it that wrote a tensor it reads. Views are
// resolved to the tensor owning their data (ggml points a view's view_src at the owner
// itself), so a node reading a KV-cache view depends on the copy that filled the cache.
package dag

import (
	"slices"

	"github.com/profinfer/profinfer/internal/assemble"
)

// DAG is the dependencies of a graph's nodes, by index into the node slice.
type DAG struct {
	Producers [][]int // for each node, the nodes whose results it reads, in order
	Critical  []int   // the critical path, first node first
	// Duration is the critical path's length in ns: its nodes' times summed, each node's
	// time running from its start to the next node's start (the last one's to its end).
	// Node spans overlap by the moments threads take to leave a barrier; these times do
	// not, so they add up to no more than the graph.
	Duration uint64
}

// Of builds the DAG of nodes, given in the order they ran (which is topological: ggml
// computes a graph's nodes in order, one after the other).
func Of(nodes []*assemble.Node) DAG {
	d := DAG{Producers: make([][]int, len(nodes))}
	writer := make(map[uint64]int, 2*len(nodes)) // tensor → the last node that wrote it
	longest := make([]uint64, len(nodes))        // the longest chain ending with each node
	prev := make([]int, len(nodes))              // its previous node, or -1
	end := -1
	for i, n := range nodes {
		prev[i] = -1
		if n.Info != nil {
			for _, t := range n.Info.Reads {
				p, ok := writer[t]
				if !ok || slices.Contains(d.Producers[i], p) {
					continue
				}
				d.Producers[i] = append(d.Producers[i], p)
				if prev[i] < 0 || longest[p] > longest[prev[i]] {
					prev[i] = p
				}
			}
		}
		next := n.End
		if i+1 < len(nodes) {
			next = nodes[i+1].Start
		}
		longest[i] = next - n.Start
		if prev[i] >= 0 {
			longest[i] += longest[prev[i]]
		}
		if end < 0 || longest[i] > longest[end] {
			end = i
		}
		for _, t := range []uint64{n.Tensor, n.Tensor2} {
			if t != 0 {
				writer[t] = i
			}
		}
		if n.Info != nil && n.Info.Owner != 0 {
			writer[n.Info.Owner] = i
		}
	}
	if end < 0 {
		return d
	}
	d.Duration = longest[end]
	for i := end; i >= 0; i = prev[i] {
		d.Critical = append(d.Critical, i)
	}
	slices.Reverse(d.Critical)
	return d
}
