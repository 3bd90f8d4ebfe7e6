package advise

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/profinfer/profinfer/internal/backends"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// Offloading: the backends a process computes on, the copies between them, and what the
// CPU computes beside a device.

// Thresholds of the offload rules.
var (
	offloadShare = &Threshold{Name: "offloadShare", Value: 0.2, Unit: Share,
		Why: "Copies between backends taking a fifth of a phase's llama_decode time cost more than offloading the layers between them saves. A share of the same decodes' time; " +
			"a faster CPU or device leaves the copies, bound by the bus, a larger share, as they then cost more of the token."}
	fallbackShare = &Threshold{Name: "fallbackShare", Value: 0.2, Unit: Share,
		Why: "In a process that offloads, the CPU's splits taking a fifth of a token's compute hold the device back: it waits for them at every split. A share of the same token's compute, the CPU's beside the device's."}
	minDecodes = &Threshold{Name: "minDecodes", Value: 8, Unit: Number,
		Why: "Decodes a process must have made before its backends are judged: a backend may not have started on the first few, or the process may be a tool that decodes once. A count, whatever the CPU."}
)

var offloadRule = Rule{
	ID:         "offload-copies",
	Name:       "offload copies",
	Reads:      []string{schema.SpanCopy, schema.SpanDecode, schema.GGMLCopyBytes},
	Fires:      "tensor copies between backends ≥ {offloadShare} of `llama_decode` time",
	Says:       "the offload layout costs more than it saves",
	Thresholds: []*Threshold{offloadShare},
	apply:      offload,
}

// offload: the copies between backends cost a large share of a phase's decodes.
func offload(p *summary.Process) (summary.Finding, bool) {
	for _, name := range []string{"decode", "prefill"} {
		ph := seen(p, name)
		if ph == nil || ph.DecodeSeconds <= 0 || ph.CopySeconds <= 0 {
			continue
		}
		share := ph.CopySeconds / ph.DecodeSeconds
		if share < offloadShare.Value {
			continue
		}
		var moved int64
		for _, c := range p.Copies {
			moved += c.Bytes
		}
		return summary.Finding{
			Severity: summary.Warning,
			Title:    "Copies between backends cost more than the offload saves",
			Advice:   "Tensors cross between backends on every " + name + ". Offload more of the model (more -ngl layers) so splits are fewer, keep the layers that fall back to the CPU together, or keep the model on one backend.",
			Evidence: []string{
				fmt.Sprintf("%s: %s of llama_decode time copying tensors between backends", name, pct(share)),
				fmt.Sprintf("%s of splits on other backends; %.1f MB copied in all", pct(ph.SplitSeconds/ph.DecodeSeconds), float64(moved)/1e6),
			},
		}, true
	}
	return summary.Finding{}, false
}

// notDevice are backends with libraries of their own that compute on no device: RPC
// sends the graph to a server only when asked to, BLAS is the CPU's.
var notDevice = map[string]bool{"rpc": true, "blas": true}

var deviceUnusedRule = Rule{
	ID:         "device-unused",
	Name:       "device unused",
	Reads:      []string{schema.ResourceGGMLBackendsLoaded, schema.SpanSplit, schema.GGMLBackend},
	Fires:      "a GPU backend library is loaded (not RPC or BLAS) but none of ≥ {minDecodes} decodes put a split on it",
	Says:       "every node runs on the CPU; the devices ggml listed, `GGML_VK_VISIBLE_DEVICES` for software Vulkan drivers, CUDA's libraries, `-ngl`",
	Thresholds: []*Threshold{minDecodes},
	apply:      deviceUnused,
}

// deviceUnused: a GPU backend is loaded but no split ran on it, which is how a backend that
// found no device it would use falls back to the CPU, silently.
func deviceUnused(p *summary.Process) (summary.Finding, bool) {
	var gpus []string
	for _, b := range p.Loaded {
		if !notDevice[b] {
			gpus = append(gpus, b)
		}
	}
	if len(gpus) == 0 || float64(decodes(p)) < minDecodes.Value {
		return summary.Finding{}, false
	}
	for _, b := range p.Backends {
		if b.Backend != backends.CPU && b.Splits > 0 {
			return summary.Finding{}, false
		}
	}
	loaded := strings.Join(gpus, ", ")
	return summary.Finding{
		Severity: summary.Warning,
		Title:    "The " + loaded + " backend is loaded, but every node runs on the CPU",
		Advice: "The process loaded a GPU backend that computes nothing: it found no device it would use, or no layer was offloaded to it. " +
			"Look for the devices ggml lists at start in the engine's log. Vulkan skips CPU-type devices (software drivers such as lavapipe) unless GGML_VK_VISIBLE_DEVICES names them; " +
			"CUDA needs its driver and runtime libraries. Then check the GPU layers setting (-ngl, gpuLayers).",
		Evidence: []string{
			fmt.Sprintf("loaded: libggml-%s", strings.Join(gpus, ", libggml-")),
			fmt.Sprintf("%d llama_decode calls, every split on the CPU backend", decodes(p)),
		},
	}, true
}

var fallbackRule = Rule{
	ID:         "cpu-fallback",
	Name:       "CPU fallback",
	Reads:      []string{schema.SpanSplit, schema.SpanDevice, schema.GGMLDeviceWaitNS, schema.GGMLLayer},
	Fires:      "in a process that offloads, its CPU splits take ≥ {fallbackShare} of a token's compute (CPU splits and device work), over ≥ {minDecodes} decodes",
	Says:       "the per-token milliseconds on each side, the CPU's top ops, and [which of two causes](#what-the-cpu-computes-beside-a-gpu) with its layers, ops and share: layers the GPU layers setting left on the CPU (more `-ngl`, `gpuLayers`), ops the backend did not run in its own layers (the engine's log, another quantisation, a newer build)",
	Thresholds: []*Threshold{fallbackShare, minDecodes},
	apply:      fallback,
}

// fallback: in a process that offloads, the CPU computes a large share: layers the GPU
// layers setting left on the CPU, or ops the GPU backend does not run in the layers it
// computes. The devices' layers tell them apart where their nodes were read.
func fallback(p *summary.Process) (summary.Finding, bool) {
	var dev []string
	onDevice := map[int]bool{}
	read := false // whether any device's nodes were read: its layers are then known
	for _, b := range p.Backends {
		if b.Backend != backends.CPU && b.DeviceSplits > 0 {
			dev = append(dev, summary.BackendName(b.Backend))
			read = read || len(b.Ops) > 0
			for _, l := range b.Layers {
				onDevice[l] = true
			}
		}
	}
	// The CPU's share of a token as the views lead with it: each backend's part, a
	// device's from its splits seen done.
	lead := summary.LeadOf(p)
	if len(dev) == 0 || lead == nil || float64(decodes(p)) < minDecodes.Value {
		return summary.Finding{}, false
	}
	var cpu summary.Part
	var device float64
	for _, part := range lead.Parts {
		if part.Backend == backends.CPU {
			cpu = part
		} else {
			device += part.Device
		}
	}
	if cpu.Share < fallbackShare.Value {
		return summary.Finding{}, false
	}
	devs := strings.Join(dev, ", ")
	f := summary.Finding{
		Severity: summary.Warning,
		Title:    fmt.Sprintf("The CPU computes %s of a token that offloads to %s", pct(cpu.Share), devs),
		Advice: "Nodes the GPU does not compute run on the CPU, in splits of their own, with copies between. Offload every layer and the output layer " +
			"(-ngl 99, gpuLayers \"max\") where the model fits in the GPU's memory, and look in the engine's log for ops the GPU backend does not support.",
		Evidence: []string{fmt.Sprintf("per %s: %.2f ms of CPU splits, at most %.2f ms of device work", lead.Unit, cpu.Compute*1e3, device*1e3)},
	}
	ph := phase(p, "decode")
	if ph == nil || len(ph.Ops) == 0 {
		return f, true
	}
	var top []string
	for _, op := range ph.Ops[:min(3, len(ph.Ops))] {
		top = append(top, fmt.Sprintf("%s %s", op.Op, pct(op.Share)))
	}
	f.Evidence = append(f.Evidence, "on the CPU, by share of its traced graph time: "+strings.Join(top, ", "))
	// The CPU's layers whose matmuls no device computes, and those whose it does.
	var left, shared []int
	var leftShare, sharedShare float64
	for _, l := range ph.Layers {
		switch {
		case l.Layer < 0:
		case onDevice[l.Layer]:
			shared, sharedShare = append(shared, l.Layer), sharedShare+l.Share
		default:
			left, leftShare = append(left, l.Layer), leftShare+l.Share
		}
	}
	if !read {
		if len(left) > 0 {
			f.Evidence = append(f.Evidence, "layers computed on the CPU: "+layers(left))
		}
		return f, true
	}
	var title, advice []string
	var fell float64 // the share of the CPU's time the causes named hold
	if len(left) > 0 {
		title = append(title, layersNoun(left)+" left on the CPU")
		advice = append(advice, fmt.Sprintf("The GPU layers setting left %s on the CPU: offload more (-ngl, gpuLayers; -ngl 99 or gpuLayers \"max\" for every layer and the output layer) where the model fits in the GPU's memory.", layersNoun(left)))
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s, %s of the CPU's traced decode time: left on the CPU by the GPU layers setting, with no matmul on %s", layersNoun(left), pct(leftShare), devs))
		fell += leftShare
	}
	if names, shares := fallenOps(ph, onDevice); names != "" {
		title = append(title, fmt.Sprintf("ops %s did not run (%s)", devs, names))
		advice = append(advice, fmt.Sprintf("In the layers %s computes, the CPU ran %s: the backend lacks those ops, or them on these types (the engine's log at load names the weights it cannot use). "+
			"Another quantisation of the model, or a newer build of the engine, may run them on the GPU.", devs, names))
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s, %s of the CPU's traced decode time: ops %s did not run in layers it computes (%s)", layersNoun(shared), pct(sharedShare), devs, shares))
		fell += sharedShare
	}
	if len(title) == 0 {
		return f, true
	}
	f.Title += ": " + strings.Join(title, ", and ")
	f.Advice = "Nodes the GPU does not compute run on the CPU, in splits of their own, with copies between. " + strings.Join(advice, " ")
	if rest := 1 - fell; rest >= 0.005 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the rest, %s: the input's embedding rows, which the CPU always computes, and nodes whose names give no layer", pct(rest)))
	}
	return f, true
}

// fallenOps names the ops the CPU computed in phase ph's layers that are onDevice, those
// of the most time first, alone and with their shares of the phase's traced graph time:
// ops the device's backend did not run. It reads the heatmap, which holds the phase's
// busiest ops; "" where none of them fell.
func fallenOps(ph *summary.Phase, onDevice map[int]bool) (names, shares string) {
	type fallen struct {
		op   string
		secs float64
	}
	var ops []fallen
	if m := ph.OpLayer; m != nil {
		for i, op := range m.Ops {
			var secs float64
			for j, l := range m.Layers {
				if onDevice[l] {
					secs += m.Seconds[i][j]
				}
			}
			if secs > 0 {
				ops = append(ops, fallen{op, secs})
			}
		}
	}
	slices.SortStableFunc(ops, func(x, y fallen) int { return cmp.Compare(y.secs, x.secs) })
	total := max(cmp.Or(ph.GraphSeconds, ph.NodeSeconds), 1e-12)
	var n, s []string
	for _, o := range ops[:min(len(ops), 5)] {
		n = append(n, o.op)
		s = append(s, o.op+" "+pct(o.secs/total))
	}
	return strings.Join(n, ", "), strings.Join(s, ", ")
}

// layersNoun is "layer 3" or "layers 0–11, 14".
func layersNoun(ls []int) string {
	if len(ls) == 1 {
		return "layer " + strconv.Itoa(ls[0])
	}
	return "layers " + layers(ls)
}

// layers lists ascending layer numbers, runs as ranges: "0–11, 14".
func layers(ls []int) string {
	var out []string
	for i := 0; i < len(ls); {
		j := i
		for j+1 < len(ls) && ls[j+1] == ls[j]+1 {
			j++
		}
		r := strconv.Itoa(ls[i])
		if j > i {
			r += "–" + strconv.Itoa(ls[j])
		}
		out = append(out, r)
		i = j + 1
	}
	return strings.Join(out, ", ")
}
