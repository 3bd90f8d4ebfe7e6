package summary

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/profinfer/profinfer/internal/schema"
)

// deviceWork gives g's timeline the device splits of its decode, and the copies queued to
// them: a decode's spans are exported together, so they are in rs.
func (a *Aggregator) deviceWork(rs ptrace.ResourceSpans, g *graphRef) {
	tl := g.timeline
	trace := g.trace
	at := func(ts pcommon.Timestamp) float64 { return float64(int64(ts)-int64(g.start)) / 1e3 }
	schema.EachSpan(rs, func(s ptrace.Span) {
		if len(tl.Device) >= maxWork || s.TraceID() != trace {
			return
		}
		attrs := s.Attributes()
		w := Work{Start: at(s.StartTimestamp()), Duration: schema.Seconds(s) * 1e6}
		switch {
		case s.Name() == schema.SpanDevice:
			w.Backend = schema.Str(attrs, schema.GGMLBackend)
			w.Wait = float64(schema.Int(attrs, schema.GGMLDeviceWaitNS)) / 1e3
			w.Bound = schema.Bool(attrs, schema.GGMLDeviceEndBound)
			w.Nodes = schema.Int(attrs, schema.GGMLGraphNodes)
		case s.Name() == schema.SpanCopy && schema.Bool(attrs, schema.GGMLCopyQueued):
			w.Backend = schema.Str(attrs, schema.GGMLBackendDestination)
			w.Copy = true
			w.Bytes = schema.Int(attrs, schema.GGMLCopyBytes)
			w.Tensor = schema.Str(attrs, schema.GGMLTensorName)
		default:
			return
		}
		w.Backend = cmp.Or(w.Backend, unknownValue)
		tl.Device = append(tl.Device, w)
	})
}

// backend returns the sums of the backend s names; nil past 64 backends.
func (p *proc) backend(s ptrace.Span) *Backend {
	name := cmp.Or(schema.Str(s.Attributes(), schema.GGMLBackend), unknownValue)
	b := p.backends[name]
	if b == nil && len(p.backends) < 64 {
		b = &Backend{Backend: name}
		p.backends[name] = b
	}
	return b
}

// opOffloadTokens: from batches of this many tokens, a GPU backend also takes the
// matmuls of layers whose weights the CPU holds (ggml's op offload, its backends' least
// batch), so only smaller ones tell the layers offloaded to it.
const opOffloadTokens = 32

// device sums a device's work on a split, counts the ops of its nodes, and notes the
// layers of those that run where their layer's weights are.
func (a *Aggregator) device(p *proc, s ptrace.Span) {
	b := p.backend(s)
	if b == nil {
		return
	}
	b.DeviceSplits++
	b.DeviceSeconds += schema.Seconds(s)
	b.WaitSeconds += float64(schema.Int(s.Attributes(), schema.GGMLDeviceWaitNS)) / 1e9
	// llama_decode returns once a GPU's work is queued, and the CPU waits for it after
	// (reading the logits): the token takes until the device's work was seen done, in
	// the phase's time and in the decode's latency.
	if name, was, now := a.phases.extend(s.TraceID(), int64(s.EndTimestamp())); now > was {
		p.phase(name).DecodeSeconds += now - was
		if name == decode {
			p.latency.move(was, now)
		}
	}
	_, tokens := a.phaseOf(s)
	small := tokens > 0 && tokens < opOffloadTokens
	evs := s.Events()
	for i := 0; i < evs.Len(); i++ {
		if b.Ops == nil {
			b.Ops = map[string]int64{}
		}
		op, attrs := evs.At(i).Name(), evs.At(i).Attributes()
		if _, weights := attrs.Get(schema.GGMLWeightType); small && weights {
			if l, ok := attrs.Get(schema.GGMLLayer); ok {
				b.addLayer(int(schema.Integer(l)))
			}
		}
		if b.Ops[op] == 0 && len(b.Ops) >= 128 {
			continue
		}
		b.Ops[op]++
		if ns, ok := attrs.Get(schema.GGMLDeviceNodeNS); ok {
			if b.OpSeconds == nil {
				b.OpSeconds = map[string]float64{}
			}
			b.OpSeconds[op] += float64(ns.Int()) / 1e9
		}
	}
}

// addLayer notes layer l in b's, kept in order, at most maxLayers of them.
func (b *Backend) addLayer(l int) {
	if i, found := slices.BinarySearch(b.Layers, l); !found && len(b.Layers) < maxLayers {
		b.Layers = slices.Insert(b.Layers, i, l)
	}
}

func (a *Aggregator) split(p *proc, s ptrace.Span) {
	b := p.backend(s)
	if b == nil {
		return
	}
	backend := b.Backend
	b.Splits++
	b.Seconds += schema.Seconds(s)
	if backend != "CPU" {
		name, _ := a.phaseOf(s)
		p.phase(name).SplitSeconds += schema.Seconds(s)
	}
}

func (a *Aggregator) copy(p *proc, s ptrace.Span) {
	attrs := s.Attributes()
	k := [2]string{cmp.Or(schema.Str(attrs, schema.GGMLBackendSource), unknownValue), cmp.Or(schema.Str(attrs, schema.GGMLBackendDestination), unknownValue)}
	c := p.copies[k]
	if c == nil {
		if len(p.copies) >= 64 {
			return
		}
		c = &Copy{Source: k[0], Destination: k[1]}
		p.copies[k] = c
	}
	c.Copies++
	c.Bytes += schema.Int(attrs, schema.GGMLCopyBytes)
	c.Seconds += schema.Seconds(s)
	name, _ := a.phaseOf(s)
	p.phase(name).CopySeconds += schema.Seconds(s)
}
