package probe

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

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
		"graph_nodes_off":      uint32(l.GraphNodes),
		"cplan_nthreads_off":   uint32(l.CplanNThreads),
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}

// Programs are the programs for each struct layout in use. The offsets are constants, so
// that a probe hit reads no map to learn them: a process whose ggml has another layout
// than the first gets its own copy of the programs, sharing the first copy's maps and
// ring buffer.
type Programs struct {
	spec   *ebpf.CollectionSpec // every constant but the layout's set
	kernel Kernel
	maps   map[string]*ebpf.Map

	mu     sync.Mutex
	copies map[ggml.Layout]*bpf.ProfinferPrograms
}

// newPrograms keeps a copy of spec for loading programs of each layout on maps. The perf
// counter map is not shared by name: CounterMap tied the programs' instructions to it
// already.
func newPrograms(spec *ebpf.CollectionSpec, k Kernel, maps *bpf.ProfinferMaps) *Programs {
	shared := map[string]*ebpf.Map{}
	v := reflect.ValueOf(maps).Elem()
	for i := range v.NumField() {
		if name := v.Type().Field(i).Tag.Get("ebpf"); name != bpf.ProfinferMapCounters {
			shared[name] = v.Field(i).Interface().(*ebpf.Map)
		}
	}
	return &Programs{spec: spec.Copy(), kernel: k, maps: shared, copies: map[ggml.Layout]*bpf.ProfinferPrograms{}}
}

// For returns the programs for targets of layout l, loading them the first time.
func (p *Programs) For(l ggml.Layout) (*bpf.ProfinferPrograms, error) { return p.load(l, nil) }

// load is For, with the kernel's BTF from types; nil decodes it anew.
func (p *Programs) load(l ggml.Layout, types *btf.Cache) (*bpf.ProfinferPrograms, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if progs := p.copies[l]; progs != nil {
		return progs, nil
	}
	spec := p.spec.Copy()
	if err := setLayout(spec, l); err != nil {
		return nil, err
	}
	progs, err := loadPrograms(spec, p.kernel, p.maps, types)
	if err != nil {
		if l != ggml.Layouts[0] {
			err = fmt.Errorf("for the layout of ggml %s: %w", l.Versions, err)
		}
		return nil, err
	}
	p.copies[l] = progs
	return progs, nil
}

// loadPrograms loads the programs of spec that kernel k runs, on maps. A variant's
// field holds its fallback where the kernel runs that instead.
func loadPrograms(spec *ebpf.CollectionSpec, k Kernel, maps map[string]*ebpf.Map, types *btf.Cache) (*bpf.ProfinferPrograms, error) {
	instead := map[string]string{}
	for name := range spec.Programs {
		if connProgram(name) { // loaded apart, as they are attached
			delete(spec.Programs, name)
		}
	}
	for _, v := range variants {
		run, drop := v.program, v.fallback
		if !v.runs(k) {
			run, drop = drop, run
		}
		delete(spec.Programs, drop)
		if drop != "" {
			instead[drop] = run
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: maps, Cache: types})
	if err != nil {
		return nil, loadError(k, err)
	}
	// The programs hold what they use; the collection's handles to the shared maps are
	// clones, and its own maps (the constants) are the programs' alone.
	for _, m := range coll.Maps {
		m.Close()
	}
	progs := &bpf.ProfinferPrograms{}
	v := reflect.ValueOf(progs).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get("ebpf")
		if run, ok := instead[name]; ok {
			name = run
		}
		v.Field(i).Set(reflect.ValueOf(coll.Programs[name]))
	}
	return progs, nil
}

// Close closes the programs of every layout.
func (p *Programs) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l, progs := range p.copies {
		progs.Close()
		delete(p.copies, l)
	}
}
