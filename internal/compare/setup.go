package compare

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

const unknown = "unknown"

// facts is what a side's recording says of its setup: text by SetupItem key, and the
// roofs as numbers.
type facts struct {
	text   map[string]string
	roofs  summary.Roofs
	shares map[string]float64 // by phase, the threads' share of a CPU
	// settings are, by context key and phase, the values its decodes' contexts had.
	settings map[string]map[string][]int64
}

// Keys of the setup items that are not resource attributes.
const (
	keyGraphThreads = "ggml.threads"
	keyFlash        = "flash_attention"
	keyKV           = "kv_cache"
	keyLoaded       = "ggml.backends.loaded"
	keyLayers       = "layers_offloaded"
	keyRoofs        = "roofs"
	keyQuota        = "cpu_quota"
	keyCPUShare     = "cpu_share"
)

// setupItems are the setup's items in the order a person reads them: what ran, how it
// was built and configured, the model, where it ran.
var setupItems = []struct{ key, label string }{
	{schema.ResourceGGMLRuntime, "runtime"},
	{schema.ResourceProcessExecutablePath, "executable"},
	{schema.ResourceProcessExecutableBuildID, "build id"},
	{schema.ResourceGGMLVersion, "ggml version"},
	{schema.ResourceLlamaBuildNumber, "llama.cpp build"},
	{schema.ResourceLlamaBuildCommit, "llama.cpp commit"},
	{schema.ResourceGGMLCPUVariant, "CPU backend variant"},
	{schema.ResourceGGMLCPUSIMD, "CPU backend's SIMD"},
	{schema.ResourceHostCPUSIMD, "CPU's SIMD"},
	{schema.ResourceLlamaModelName, "model"},
	{schema.ResourceLlamaModelArchitecture, "architecture"},
	{schema.ResourceLlamaModelParameters, "parameters"},
	{schema.ResourceLlamaModelFileType, "weights' type (file)"},
	{schema.ResourceLlamaModelPath, "model file"},
	{schema.ResourceWhisperModelType, "whisper model"},
	{schema.ResourceWhisperModelFileType, "whisper weights' type"},
	{keyGraphThreads, "threads"},
	{schema.LlamaContextBatchSize, "batch size"},
	{schema.LlamaContextUbatchSize, "ubatch size"},
	{schema.LlamaContextSize, "context size"},
	{keyFlash, "flash attention"},
	{keyKV, "KV cache type"},
	{keyLoaded, "backends loaded"},
	{schema.ResourceGGMLDeviceSoftware, "device driver"},
	{keyLayers, "layers offloaded"},
	{schema.ResourceHostName, "host"},
	{schema.ResourceOSVersion, "kernel"},
	{keyRoofs, "roofs"},
	{keyQuota, "CPU quota"},
	{keyCPUShare, "threads on a CPU"},
}

// contextKeys are the settings of its llama_context that each llama_decode span carries.
// A process may make several contexts (llama-bench one per test, each sized for it), so
// they are compared phase by phase, as the sets of values each side's decodes used.
var contextKeys = [...]string{schema.LlamaContextBatchSize, schema.LlamaContextUbatchSize, schema.LlamaContextSize}

// noteSettings adds a decode's context settings to its phase's.
func (ph *phaseFold) noteSettings(attrs pcommon.Map) {
	for i, k := range contextKeys {
		if v := schema.Int(attrs, k); v > 0 && !slices.Contains(ph.settings[i], v) && len(ph.settings[i]) < maxSettings {
			ph.settings[i] = append(ph.settings[i], v)
		}
	}
}

// facts reads the side's setup from the summary it fed, over the processes it took, and
// from its own fold.
func (s *Side) facts() facts {
	f := facts{text: map[string]string{}, shares: map[string]float64{}, settings: map[string]map[string][]int64{}}
	var procs []*summary.Process
	for _, p := range s.agg.Snapshot().Processes {
		i := slices.IndexFunc(p.Resource, func(kv summary.KV) bool { return kv.Key == schema.ResourceProcessPID })
		if i < 0 {
			continue
		}
		if pid, err := strconv.ParseInt(p.Resource[i].Value, 10, 64); err == nil {
			if _, ok := s.took[pid]; ok {
				procs = append(procs, p)
			}
		}
	}
	add := func(key, v string) {
		if v == "" {
			return
		}
		if old := f.text[key]; old == "" {
			f.text[key] = v
		} else if !slices.Contains(strings.Split(old, " | "), v) {
			f.text[key] = old + " | " + v // pooled processes that differ
		}
	}
	for _, p := range procs {
		for _, kv := range p.Resource {
			// Loaded is a list: below. The context's settings there are one context's,
			// the first: the decodes carry each their own.
			if kv.Key != keyLoaded && !slices.Contains(contextKeys[:], kv.Key) {
				add(kv.Key, kv.Value)
			}
		}
		add(keyLoaded, cmp.Or(strings.Join(p.Loaded, ", "), "none"))
		add(keyLayers, layersOffloaded(p))
		if r := p.Roofs; r.FLOPS > 0 || r.Bandwidth > 0 {
			f.roofs = r
			roofs := fmt.Sprintf("%.1f GFLOP/s, %.1f GB/s", r.FLOPS/1e9, r.Bandwidth/1e9)
			if r.Int8 > 0 {
				roofs += fmt.Sprintf(", int8 %.1f Gop/s", r.Int8/1e9)
			}
			add(keyRoofs, roofs)
		}
		if q := p.Quota; q != nil {
			add(keyQuota, fmt.Sprintf("%.2f CPUs", q.CPUs))
		} else {
			add(keyQuota, "none seen")
		}
		var shares []string
		for _, ph := range p.Phases {
			if ph.CPU != nil && ph.CPU.Graphs > 0 {
				shares = append(shares, fmt.Sprintf("%s %.0f%%", ph.Name, 100*ph.CPU.Share))
				f.shares[ph.Name] = ph.CPU.Share
			}
		}
		add(keyCPUShare, strings.Join(shares, ", "))
	}
	for i, k := range contextKeys {
		byPhase := map[string][]int64{}
		for name, ph := range s.phases {
			if vs := ph.settings[i]; len(vs) > 0 {
				byPhase[name] = slices.Sorted(slices.Values(vs))
			}
		}
		f.settings[k] = byPhase
	}
	var threads []string
	for _, t := range slices.Sorted(slices.Values(s.threads)) {
		threads = append(threads, strconv.FormatInt(t, 10))
	}
	add(keyGraphThreads, strings.Join(threads, ", "))
	switch {
	case s.flash > 0:
		add(keyFlash, "on (FLASH_ATTN_EXT nodes)")
	case s.described > 0:
		add(keyFlash, "off (no FLASH_ATTN_EXT node)")
	}
	if s.kv != [2]string{} {
		add(keyKV, fmt.Sprintf("K %s, V %s", cmp.Or(s.kv[0], unknown), cmp.Or(s.kv[1], unknown)))
	}
	return f
}

// layersOffloaded names, for each device that computed splits, the layers whose weights
// it holds (summary.Backend.Layers).
func layersOffloaded(p *summary.Process) string {
	var parts []string
	for _, b := range p.Backends {
		if b.Backend == "CPU" || b.Splits == 0 {
			continue
		}
		if len(b.Layers) == 0 {
			parts = append(parts, b.Backend+": no layer's weights")
		} else {
			parts = append(parts, b.Backend+": layers "+Ranges(b.Layers))
		}
	}
	if len(parts) == 0 {
		return "none: the CPU computed every split"
	}
	return strings.Join(parts, ", ")
}

// Ranges writes sorted numbers as ranges: 0–3, 5, 7–9.
func Ranges(xs []int) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d–%d", xs[i], xs[j]))
		} else {
			parts = append(parts, strconv.Itoa(xs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// setup lists the items on both sides, those that differ first.
func setup(fa, fb facts) []SetupItem {
	var items []SetupItem
	for _, it := range setupItems {
		a, b := fa.text[it.key], fb.text[it.key]
		if a == "" && b == "" && (it.key == schema.ResourceWhisperModelType || it.key == schema.ResourceWhisperModelFileType || it.key == schema.ResourceHostName) {
			continue // not a whisper.cpp model; no resource detector
		}
		differs := a != "" && b != "" && a != b
		switch {
		case it.key == keyRoofs:
			differs = roofsDiffer(fa.roofs, fb.roofs, 0.1)
		case it.key == keyCPUShare:
			differs = sharesDiffer(fa.shares, fb.shares)
		case slices.Contains(contextKeys[:], it.key):
			a, b, differs = compareSettings(fa.settings[it.key], fb.settings[it.key])
		}
		items = append(items, SetupItem{Key: it.key, Label: it.label, A: cmp.Or(a, unknown), B: cmp.Or(b, unknown), Differs: differs})
	}
	slices.SortStableFunc(items, func(x, y SetupItem) int {
		switch {
		case x.Differs == y.Differs:
			return 0
		case x.Differs:
			return -1
		}
		return 1
	})
	return items
}

// compareSettings writes the values of a context's setting each side's phases used, and
// says whether they differ: like with like, phase by phase, over the phases both sides
// have values for (every phase of each where they have none in common, then differing
// in none). A phase whose decodes used several values (a context per test) says that it
// varies within the run, and differs only where the other side's set is another.
func compareSettings(a, b map[string][]int64) (ta, tb string, differs bool) {
	var common []string
	for ph := range a {
		if _, ok := b[ph]; ok {
			common = append(common, ph)
		}
	}
	if len(common) == 0 {
		return settingsText(a, slices.Collect(maps.Keys(a))), settingsText(b, slices.Collect(maps.Keys(b))), false
	}
	for _, ph := range common {
		differs = differs || !slices.Equal(a[ph], b[ph])
	}
	return settingsText(a, common), settingsText(b, common), differs
}

// settingsText writes a setting's values in phases: the values alone where every phase
// used the same, else phase by phase ("prefill 16, decode 48").
func settingsText(byPhase map[string][]int64, phases []string) string {
	slices.SortFunc(phases, byOrder)
	values := func(vs []int64) string {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = strconv.FormatInt(v, 10)
		}
		if len(vs) > 1 {
			return strings.Join(parts, " or ") + " (varies within the run)"
		}
		return parts[0]
	}
	var parts []string
	same := true
	for _, ph := range phases {
		parts = append(parts, ph+" "+values(byPhase[ph]))
		same = same && slices.Equal(byPhase[ph], byPhase[phases[0]])
	}
	switch {
	case len(phases) == 0:
		return ""
	case same:
		return values(byPhase[phases[0]])
	}
	return strings.Join(parts, ", ")
}

// roofsDiffer says whether either roof differs by more than frac, both being known.
func roofsDiffer(a, b summary.Roofs, frac float64) bool {
	far := func(x, y float64) bool { return x > 0 && y > 0 && math.Abs(x-y) > frac*max(x, y) }
	return far(a.FLOPS, b.FLOPS) || far(a.Bandwidth, b.Bandwidth) || far(a.Int8, b.Int8)
}

// sharesDiffer says whether the threads had a CPU for a share of some phase's graphs
// that differs by more than ten points: measured figures, which differ a little always.
func sharesDiffer(a, b map[string]float64) bool {
	for ph, x := range a {
		if y, ok := b[ph]; ok && math.Abs(x-y) > 0.1 {
			return true
		}
	}
	return false
}

// warnings says what makes the sides compare different things: another model, another
// machine, several processes pooled.
func warnings(a, b *Side, fa, fb facts) []string {
	out := []string{}
	var model []string
	for _, k := range []string{schema.ResourceLlamaModelName, schema.ResourceLlamaModelArchitecture, schema.ResourceLlamaModelParameters, schema.ResourceWhisperModelType} {
		if x, y := fa.text[k], fb.text[k]; x != "" && y != "" && x != y {
			model = append(model, fmt.Sprintf("%s %s vs %s", k, x, y))
		}
	}
	if len(model) > 0 {
		out = append(out, "different models ("+strings.Join(model, "; ")+"): a token of one is not the work of a token of the other")
	}
	if x, y := fa.text[schema.ResourceHostName], fb.text[schema.ResourceHostName]; x != "" && y != "" && x != y {
		out = append(out, fmt.Sprintf("different machines (host %s vs %s): a change may be the machine's", x, y))
	} else if roofsDiffer(fa.roofs, fb.roofs, 0.25) {
		out = append(out, fmt.Sprintf("different machines, or one loaded while its roofs were measured (roofs %s vs %s): a change may be the machine's",
			fa.text[keyRoofs], fb.text[keyRoofs]))
	}
	for _, s := range []*Side{a, b} {
		if s.strays > 0 {
			out = append(out, fmt.Sprintf("side %s: %d spans came in another batch than their graph (a batch processor splitting decodes?) and are left out: the ops' split is short by them, the graphs' time keeps them", s.Name, s.strays))
		}
		if len(s.took) > 1 {
			out = append(out, fmt.Sprintf("side %s pools %d processes (%s): their steps are summed as one", s.Name, len(s.took), listProcesses(s.took)))
		}
	}
	return out
}
