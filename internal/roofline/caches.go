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
