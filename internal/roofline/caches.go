package roofline

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cache is one level of data cache as the probe measures it: its size over the CPUs
// it serves, and the buffer each probe thread reads to stay within its instance.
type cache struct {
	Level
	perThread int64
}

// caches reads the data and unified cache levels that serve cpus from sysfs (root is
// /sys/devices/system/cpu), nearest first. A level's size is that of its instances
// serving cpus together; each thread's buffer is half its instance over the CPUs of cpus
// that share it, so that the buffers of all of them fit with room to spare.
func caches(root string, cpus []int) []cache {
	type instance struct {
		size    int64
		sharers int
	}
	levels := map[int]map[string]instance{} // by level, then shared_cpu_list
	for _, c := range cpus {
		dirs, _ := filepath.Glob(filepath.Join(root, fmt.Sprintf("cpu%d", c), "cache", "index*"))
		for _, d := range dirs {
			read := func(f string) string {
				b, _ := os.ReadFile(filepath.Join(d, f))
				return strings.TrimSpace(string(b))
			}
			if t := read("type"); t != "Data" && t != "Unified" {
				continue
			}
			level, err := strconv.Atoi(read("level"))
			size := parseSize(read("size"))
			shared := read("shared_cpu_list")
			if err != nil || size <= 0 {
				continue
			}
			if levels[level] == nil {
				levels[level] = map[string]instance{}
			}
			sharers := 0
			for _, s := range parseList(shared) {
				if slices.Contains(cpus, s) {
					sharers++
				}
			}
			levels[level][shared] = instance{size: size, sharers: max(sharers, 1)}
		}
	}
	var out []cache
	for level, instances := range levels {
		c := cache{Level: Level{Name: fmt.Sprintf("L%d", level)}}
		for _, in := range instances {
			c.Size += in.size
			per := in.size / int64(in.sharers) / 2
			if c.perThread == 0 || per < c.perThread {
				c.perThread = per
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b cache) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Where sysfs lists no caches (a VM's often do not), the probe reads working sets of
// ladderFirst to ladderLast a thread, doubling, each a level of its own. A node whose
// working set is between two of them reads no faster than at the smaller one, and that
// rate is its roof: a ceiling however the hidden caches are sized. Without levels, a
// 12 MB ADD that the caches held read 113% of the memory roof (CI, session 48).
const (
	ladderFirst = 16 << 10
	ladderLast  = 16 << 20
)

// ladder is the levels the probe measures where the caches are not known, for n CPUs:
// each a working set of n buffers of one size, named for that set's size.
func ladder(n int) []cache {
	var out []cache
	for b := int64(ladderFirst); b <= ladderLast; b *= 2 {
		size := b * int64(n)
		out = append(out, cache{Level: Level{Name: "≤" + sizeName(size), Size: size}, perThread: b})
	}
	return out
}

// ceilings makes each of a ladder's measured rates the roof of the working sets up to
// its size: the rate at the size below it (or its own, where noise slowed that one).
func ceilings(levels []Level) {
	for i := len(levels) - 1; i > 0; i-- {
		levels[i].Bandwidth = max(levels[i].Bandwidth, levels[i-1].Bandwidth)
	}
}

// sizeName is bytes, a power of two, as 32KiB or 16MiB.
func sizeName(bytes int64) string {
	if bytes >= 1<<20 && bytes%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", bytes>>20)
	}
	return fmt.Sprintf("%dKiB", bytes>>10)
}

// parseSize reads a sysfs cache size, e.g. 32K.
func parseSize(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	n, err := strconv.ParseInt(strings.TrimRight(s, "KMG"), 10, 64)
	if err != nil {
		return 0
	}
	return n * mult
}

// parseList reads a CPU list, e.g. 0-3,8.
func parseList(s string) []int {
	var cpus []int
	for r := range strings.SplitSeq(s, ",") {
		lo, hi, ok := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if ok {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
