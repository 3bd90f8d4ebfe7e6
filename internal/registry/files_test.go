package registry

import (
	"debug/elf"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/testbench"
)

// testELF is an ELF file to parse: the test binary itself.
func testELF(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// loadAddr is an address in the first loadable segment of the ELF file at path.
func loadAddr(t *testing.T, path string) uint64 {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			return p.Vaddr
		}
	}
	t.Fatalf("%s has no loadable segment", path)
	return 0
}

// However many binaries come and go, the parsed files cached stay at maxFiles, the one
// asked for least recently leaving first.
func TestFilesBounded(t *testing.T) {
	exe := testELF(t)
	c := NewFiles()
	c.maxFiles = 4
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	defer c.Close()
	keep, err := c.Get(exe, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for inode := uint64(2); inode < 20; inode++ { // a binary rebuilt: a new inode each time
		now = now.Add(time.Second)
		if _, err := c.Get(exe, 1, inode); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.Get(exe, 1, 1); got != keep { // asked for all along: kept
			t.Fatalf("the file asked for all along was parsed again after %d others", inode)
		}
		if n := len(c.files); n > c.maxFiles {
			t.Fatalf("%d files cached, want at most %d", n, c.maxFiles)
		}
	}
}

// A file nobody asked for in FileLinger leaves the cache at the next sweep; one asked
// for meanwhile stays. Leaving does not close it: a holder can still read it.
func TestFilesLinger(t *testing.T) {
	exe := testELF(t)
	c := NewFiles()
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	defer c.Close()
	old, err := c.Get(exe, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(exe, 1, 2); err != nil {
		t.Fatal(err)
	}
	now = now.Add(FileLinger / 2)
	if _, err := c.Get(exe, 1, 2); err != nil { // asked for again: its linger starts over
		t.Fatal(err)
	}
	now = now.Add(FileLinger / 2)
	c.Sweep(now)
	if _, ok := c.files[[2]uint64{1, 1}]; ok {
		t.Error("a file nobody asked for in FileLinger is still cached")
	}
	if _, ok := c.files[[2]uint64{1, 2}]; !ok {
		t.Error("a file asked for within FileLinger left the cache")
	}
	if _, err := old.ReadAt(loadAddr(t, exe), 4); err != nil {
		t.Errorf("a file that left the cache cannot be read by who holds it: %v", err)
	}
	if again, err := c.Get(exe, 1, 1); err != nil || again == old {
		t.Errorf("a file asked for after it left the cache: %p (was %p), %v; want it parsed again", again, old, err)
	}
}

// The roles of at most maxRoles files are remembered, however many objects processes map.
func TestRolesBounded(t *testing.T) {
	exe := testELF(t)
	c := NewFiles()
	c.maxRoles = 4
	for inode := range uint64(3 * 4) {
		if _, err := c.Classify(1, inode, func() string { return exe }); err != nil {
			t.Fatal(err)
		}
		if n := len(c.roles); n > c.maxRoles {
			t.Fatalf("roles of %d files remembered, want at most %d", n, c.maxRoles)
		}
	}
}

// Classify finds the object that records llama.cpp's build besides the roles: the
// executables and the common library of the test bench's build, the static one that is
// everything at once, and not libllama.
func TestClassifyBuild(t *testing.T) {
	e := testbench.Require(t)
	c := NewFiles()
	for i, tc := range []struct {
		path string
		want []discover.Role
	}{
		{e.Bin("llama-server"), []discover.Role{discover.Build}},
		{e.Bin("libllama-common.so"), []discover.Role{discover.Build}},
		{e.Bin("libllama.so"), []discover.Role{discover.Llama}},
		{e.Portable("llama-server"), []discover.Role{discover.Base, discover.CPU, discover.Llama, discover.Build}},
	} {
		got, err := c.Classify(1, uint64(i), func() string { return tc.path })
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: roles %v, %v; want %v", tc.path, got, err, tc.want)
		}
	}
}
