package summary

import (
	"cmp"
	"slices"
)

// cpuBackend is the CPU backend's name, as ggml's functions give it.
const cpuBackend = "CPU"

// displayNames are backends' names as a person reads them, where ggml's function prefix
// differs: ggml-vulkan's functions are ggml_backend_vk_….
var displayNames = map[string]string{"VK": "Vulkan"}

// BackendName is a backend's name as a person reads it: "Vulkan" for "VK".
func BackendName(backend string) string { return cmp.Or(displayNames[backend], backend) }

// Offloads says whether p computed splits on a backend besides the CPU's: its views then
// open with each backend's part of a token.
func Offloads(p *Process) bool {
	return slices.ContainsFunc(p.Backends, func(b Backend) bool { return b.Backend != cpuBackend && b.Splits > 0 })
}

// Lead is where the time of a token went in a process that offloads, backend by backend.
// The backends' sums cover every phase, so each figure is their mean over every phase's
// tokens (its steps, where the runtime counts no tokens).
type Lead struct {
	Per   int64  // the tokens or steps the figures are divided by
	Unit  string // "token" or "step"
	Steps int64
	Parts []Part // largest share first
}

// Part is one backend's part of a token, in seconds.
type Part struct {
	Backend string // as ggml names it ("VK"); BackendName gives what a person reads
	Splits  int64  // in all
	// Compute is the CPU's splits computing. HandOver is the CPU queuing a device's
	// splits, Copies the CPU copying tensors to or from it (to it: queuing them).
	Compute, HandOver, Copies float64
	CopyBytes                 float64
	// Device runs from each handing over until the CPU saw the work done, Wait of it the
	// CPU blocked: the device's own time is at most Device, as a split's end is the end
	// of the CPU's wait. They are the mean of the SeenDone splits, times all of Splits:
	// the first splits, before the wait was probed, are not seen done.
	Device, Wait float64
	SeenDone     int64
	// Share is the part's time (Compute, or Device, or HandOver where no split was seen
	// done, and Copies) over every part's.
	Share float64
}

// LeadOf returns where p's tokens went, by backend; nil where p does not offload or
// computed no step.
func LeadOf(p *Process) *Lead {
	if !Offloads(p) {
		return nil
	}
	l := &Lead{Unit: "token"}
	for _, ph := range p.Phases {
		l.Per += ph.Tokens
		l.Steps += ph.Decodes
	}
	if l.Per == 0 {
		l.Per, l.Unit = l.Steps, "step"
	}
	if l.Per == 0 {
		return nil
	}
	per := float64(l.Per)
	part := func(name string) *Part {
		for i := range l.Parts {
			if l.Parts[i].Backend == name {
				return &l.Parts[i]
			}
		}
		l.Parts = append(l.Parts, Part{Backend: name})
		return &l.Parts[len(l.Parts)-1]
	}
	for _, b := range p.Backends {
		t := part(b.Backend)
		t.Splits = b.Splits
		if b.Backend == cpuBackend {
			t.Compute = b.Seconds / per
			continue
		}
		t.HandOver = b.Seconds / per
		if b.DeviceSplits > 0 {
			all := float64(b.Splits) / float64(b.DeviceSplits) / per
			t.Device, t.Wait, t.SeenDone = b.DeviceSeconds*all, b.WaitSeconds*all, b.DeviceSplits
		}
	}
	for _, c := range p.Copies {
		// A copy is its device end's: to a device, or back from one.
		end := c.Destination
		if end == cpuBackend {
			end = c.Source
		}
		t := part(end)
		t.Copies += c.Seconds / per
		t.CopyBytes += float64(c.Bytes) / per
	}
	var sum float64
	for i := range l.Parts {
		sum += l.Parts[i].time()
	}
	for i := range l.Parts {
		if sum > 0 {
			l.Parts[i].Share = l.Parts[i].time() / sum
		}
	}
	slices.SortStableFunc(l.Parts, func(a, b Part) int { return cmp.Compare(b.Share, a.Share) })
	return l
}

// time is what the part adds to a token: a device's splits from handing over until seen
// done hold the CPU's handing over and its wait.
func (t Part) time() float64 {
	if t.SeenDone > 0 {
		return t.Compute + t.Device + t.Copies
	}
	return t.Compute + t.HandOver + t.Copies
}
