package compare

import (
	"testing"

	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/signals"
)

// A build without the CPU's SIMD against one with it, on the same CPU: the setup says
// the backend's SIMD differs and the CPU's does not.
func TestSetupSIMD(t *testing.T) {
	baseline, native := *bench, *bench
	baseline.SIMD, baseline.HostSIMD = "sse2", "avx512_vnni"
	native.SIMD, native.HostSIMD = "avx512_vnni", "avx512_vnni"
	of := func(name string, o *signals.Origin) *Side {
		return side(t, name, name+".jsonl", batch(o, step(1, 1e9, true, 0, spec{op: "MUL_MAT", name: "ffn_up-0", ns: 1000})))
	}
	c := diff(t, of("A", &baseline), of("B", &native))
	items := map[string]SetupItem{}
	for _, it := range c.Setup {
		items[it.Key] = it
	}
	if it := items[schema.ResourceGGMLCPUSIMD]; !it.Differs || it.A != "sse2" || it.B != "avx512_vnni" {
		t.Errorf("the backend's SIMD %+v, want sse2 against avx512_vnni, differing", it)
	}
	if it := items[schema.ResourceHostCPUSIMD]; it.Differs || it.A != "avx512_vnni" {
		t.Errorf("the CPU's SIMD %+v, want the same", it)
	}
}
