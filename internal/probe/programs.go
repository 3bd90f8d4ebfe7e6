package probe

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/profinfer/profinfer/bpf"
	"github.com/profinfer/profinfer/internal/ggml"
)

// setLayout writes the offsets of layout l into spec's read-only constants: every offset
// the programs read comes from here, none from defaults in the C source.
func setLayout(spec *ebpf.CollectionSpec, l ggml.Layout) error {
	consts := map[string]uint32{
		"tensor_size":          uint32(l.TensorSize),
		"tensor_src_off":       uint32(l.Src),
		"tensor_view_src_off":  uint32(l.ViewSrc),
		"tensor_ne_off":        uint32(l.Ne),
		"tensor_nb_off":        uint32(l.Nb),
		"tensor_data_off":      uint32(l.Data),
		"tensor_buffer_off":    uint32(l.Buffer),
		"buffer_get_base_off":  uint32(l.BufferGetBase),
		"backend_get_name_off": uint32(l.BackendGetName),
		"type_i32":             ggml.TypeI32,
		"graph_nnodes_off":     uint32(l.GraphNNodes),
		"cplan_nthreads_off":   uint32(l.CplanNThreads),
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}

// Programs are the node, graph and token programs for each struct layout in use. The
// offsets are constants, so that a probe hit reads no map to learn them: a process whose
// ggml has another layout than the first gets its own copy of the programs, sharing the
// first copy's maps and ring buffer.
type Programs struct {
	spec  *ebpf.CollectionSpec // before loading, with every constant but the layout's set
	first ggml.Layout
	maps  map[string]*ebpf.Map

	mu     sync.Mutex
	copies map[ggml.Layout]*bpf.ProfinferPrograms
	loaded *bpf.ProfinferPrograms // the first layout's
}

// newPrograms keeps spec (not yet loaded, its layout constants set from first) for more
// layouts; objs are what loading it gave. The perf counter map is not shared by name:
// CounterMap tied the programs' instructions to it already.
func newPrograms(spec *ebpf.CollectionSpec, first ggml.Layout, objs *bpf.ProfinferObjects) *Programs {
	maps := map[string]*ebpf.Map{}
	v := reflect.ValueOf(&objs.ProfinferMaps).Elem()
	for i := range v.NumField() {
		if name := v.Type().Field(i).Tag.Get("ebpf"); name != bpf.ProfinferMapCounters {
			maps[name] = v.Field(i).Interface().(*ebpf.Map)
		}
	}
	return &Programs{spec: spec, first: first, maps: maps, loaded: &objs.ProfinferPrograms,
		copies: map[ggml.Layout]*bpf.ProfinferPrograms{}}
}

// For returns the programs for targets of layout l, loading them the first time.
func (p *Programs) For(l ggml.Layout) (*bpf.ProfinferPrograms, error) {
	if l == p.first {
		return p.loaded, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if progs := p.copies[l]; progs != nil {
		return progs, nil
	}
	spec := p.spec.Copy()
	if err := setLayout(spec, l); err != nil {
		return nil, err
	}
	progs := &bpf.ProfinferPrograms{}
	if err := spec.LoadAndAssign(progs, &ebpf.CollectionOptions{MapReplacements: p.maps}); err != nil {
		return nil, fmt.Errorf("loading the eBPF programs for the layout of ggml %s: %w", l.Versions, err)
	}
	p.copies[l] = progs
	return progs, nil
}

// Close closes the copies; the first layout's programs belong to the caller.
func (p *Programs) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l, progs := range p.copies {
		progs.Close()
		delete(p.copies, l)
	}
}
