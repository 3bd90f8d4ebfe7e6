package cpus

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// machine writes a sysfs tree under a temporary directory: for each logical CPU its SMT
// siblings, and optionally the hybrid PMUs' CPU lists or the CPUs' capacities.
func machine(t *testing.T, siblings []string, coreCPUs, atomCPUs string, capacity []int) string {
	t.Helper()
	root := t.TempDir()
	write := func(path, v string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for n, sib := range siblings {
		dir := "devices/system/cpu/cpu" + strconv.Itoa(n) + "/topology/"
		write(dir+"core_id", strconv.Itoa(n))
		write(dir+"physical_package_id", "0")
		write(dir+"core_siblings_list", "0-"+strconv.Itoa(len(siblings)-1))
		write(dir+"thread_siblings_list", sib)
		if capacity != nil {
			write("devices/system/cpu/cpu"+strconv.Itoa(n)+"/cpu_capacity", strconv.Itoa(capacity[n]))
		}
	}
	if coreCPUs != "" {
		write("devices/cpu_core/cpus", coreCPUs)
		write("devices/cpu_atom/cpus", atomCPUs)
	}
	return root
}

func seq(lo, hi int) []int {
	var out []int
	for n := lo; n <= hi; n++ {
		out = append(out, n)
	}
	return out
}

// Recorded topologies: what a process may use on each, whole and in part.
func TestTopologies(t *testing.T) {
	// An 8-core, 16-thread desktop CPU: CPU n and n+8 share a core.
	var amd []string
	for n := range 16 {
		amd = append(amd, strconv.Itoa(n%8)+","+strconv.Itoa(n%8+8))
	}
	// A hybrid laptop CPU (6 performance cores with two threads each, 8 efficient cores
	// of one): CPUs 0-11 in pairs, 12-19 alone.
	var hybrid []string
	for n := range 20 {
		if n < 12 {
			hybrid = append(hybrid, strconv.Itoa(n&^1)+"-"+strconv.Itoa(n|1))
		} else {
			hybrid = append(hybrid, strconv.Itoa(n))
		}
	}
	// An Arm phone-class CPU: 4 little cores of capacity 446 and 4 big ones of 1024.
	arm := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
	for _, tc := range []struct {
		name    string
		root    string
		allowed []int
		want    Count
	}{
		{"SMT, all", machine(t, amd, "", "", nil), seq(0, 15), Count{Allowed: 16, Cores: 8}},
		{"SMT, taskset 0-7", machine(t, amd, "", "", nil), seq(0, 7), Count{Allowed: 8, Cores: 8}},
		{"SMT, a cpuset of 0-3,8-11", machine(t, amd, "", "", nil), append(seq(0, 3), seq(8, 11)...), Count{Allowed: 8, Cores: 4}},
		{"hybrid, all", machine(t, hybrid, "0-11", "12-19", nil), seq(0, 19), Count{Allowed: 20, Cores: 14, Performance: 6}},
		{"hybrid, E-cores only", machine(t, hybrid, "0-11", "12-19", nil), seq(12, 19), Count{Allowed: 8, Cores: 8, Performance: 0}},
		{"big.LITTLE, all", machine(t, arm, "", "", []int{446, 446, 446, 446, 1024, 1024, 1024, 1024}), seq(0, 7), Count{Allowed: 8, Cores: 8, Performance: 4}},
		{"one kind, capacities equal", machine(t, arm, "", "", []int{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}), seq(0, 7), Count{Allowed: 8, Cores: 8}},
		{"two CPUs, no SMT (this test bench's)", machine(t, []string{"0", "1"}, "", "", nil), seq(0, 1), Count{Allowed: 2, Cores: 2}},
	} {
		top, err := Read(tc.root)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := top.Of(tc.allowed); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// This machine's topology and this process's affinity read, and agree.
func TestThisMachine(t *testing.T) {
	top, err := Read("/sys")
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := Allowed("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	c := top.Of(allowed)
	if c.Allowed == 0 || c.Cores == 0 || c.Cores > c.Allowed {
		t.Errorf("this process may use %+v", c)
	}
	if _, err := Allowed("/proc", 1<<30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

func TestList(t *testing.T) {
	for in, want := range map[string]int{"0-3,8,10-11\n": 7, "0": 1, "": 0, "5,5,4-5": 2} {
		if got, err := List(in); err != nil || len(got) != want {
			t.Errorf("List(%q) = %v, %v; want %d CPUs", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "0-99999999", "1-x"} {
		if _, err := List(bad); err == nil {
			t.Errorf("List(%q): no error", bad)
		}
	}
}
