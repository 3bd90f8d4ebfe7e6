package summary

import (
	"math"
	"testing"
)

// A partly offloaded process: each backend's part of a token over every phase's tokens,
// a device's time the mean of the splits seen done times all of them, the copies each
// way its device end's, and the largest share first.
func TestLead(t *testing.T) {
	p := &Process{
		Phases: []*Phase{{Name: "prefill", Decodes: 2, Tokens: 8}, {Name: "decode", Decodes: 12, Tokens: 12}},
		Backends: []Backend{{Backend: "CPU", Splits: 14, Seconds: 0.1},
			{Backend: "VK", Splits: 14, Seconds: 0.02, DeviceSplits: 7, DeviceSeconds: 0.2, WaitSeconds: 0.15}},
		Copies: []Copy{{Source: "CPU", Destination: "VK", Copies: 14, Bytes: 4000, Seconds: 0.002},
			{Source: "VK", Destination: "CPU", Copies: 14, Bytes: 1000, Seconds: 0.004}},
	}
	l := LeadOf(p)
	if l == nil || l.Per != 20 || l.Unit != "token" || l.Steps != 14 || len(l.Parts) != 2 {
		t.Fatalf("lead %+v", l)
	}
	vk, cpu := l.Parts[0], l.Parts[1]
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %g, want %g", what, got, want)
		}
	}
	if vk.Backend != "VK" || cpu.Backend != "CPU" || vk.SeenDone != 7 || vk.Splits != 14 {
		t.Fatalf("parts %+v", l.Parts)
	}
	near("the CPU's compute", cpu.Compute, 0.1/20)
	near("handing over", vk.HandOver, 0.02/20)
	near("device", vk.Device, 0.4/20) // 7 of 14 splits seen done
	near("wait", vk.Wait, 0.3/20)
	near("copies", vk.Copies, 0.006/20)
	near("bytes", vk.CopyBytes, 5000.0/20)
	near("the device's share", vk.Share, 0.406/0.506)
	near("the CPU's share", cpu.Share, 0.1/0.506)
}

// A device no split of which was seen done (before its wait was probed, or RPC's) takes
// the CPU's handing over as its part; a process without tokens is divided by its steps.
func TestLeadNotSeenDone(t *testing.T) {
	p := &Process{
		Phases:   []*Phase{{Name: "compute", Decodes: 10}},
		Backends: []Backend{{Backend: "CPU", Splits: 10, Seconds: 0.3}, {Backend: "RPC", Splits: 10, Seconds: 0.1}},
	}
	l := LeadOf(p)
	if l == nil || l.Unit != "step" || l.Per != 10 || l.Parts[0].Backend != "CPU" || math.Abs(l.Parts[1].Share-0.25) > 1e-9 {
		t.Fatalf("lead %+v", l)
	}
}

// A process that computes on the CPU alone, or has loaded a device it never used, has no
// lead: its views keep their order.
func TestNoLead(t *testing.T) {
	for _, p := range []*Process{
		{Phases: []*Phase{{Name: "decode", Decodes: 4, Tokens: 4}}},
		{Phases: []*Phase{{Name: "decode", Decodes: 4, Tokens: 4}}, Backends: []Backend{{Backend: "CPU", Splits: 4, Seconds: 1}, {Backend: "VK"}}},
	} {
		if Offloads(p) || LeadOf(p) != nil {
			t.Errorf("a lead for %+v", p.Backends)
		}
	}
	if BackendName("VK") != "Vulkan" || BackendName("CUDA") != "CUDA" {
		t.Error("backend names")
	}
}
