//go:build e2e

package ggml_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/ggml"
	"github.com/profinfer/profinfer/internal/symbols"
	"github.com/profinfer/profinfer/internal/testbench"
)

// A live llama-server: version, names and type sizes come out of its own memory.
func TestInspectLiveProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		testbench.Missing(t, "root (reading another process's memory)")
	}
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := e.StartServer(ctx, e.Bin("llama-server"), "tiny-dense", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		t.Fatal(err)
	}
	proc, err := discover.Inspect(fs, "/proc", srv.PID(), func(_, _ uint64, path func() string) ([]discover.Role, error) {
		found, err := symbols.Defines(path(), discover.RoleSymbol[:])
		var roles []discover.Role
		for r, ok := range found {
			if ok {
				roles = append(roles, discover.Role(r))
			}
		}
		return roles, err
	})
	if err != nil || proc == nil {
		t.Fatalf("discover: %v, %v", proc, err)
	}
	base := proc.Module(discover.Base)
	f, err := symbols.Open(base.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := os.Open("/proc/" + strconv.Itoa(srv.PID()) + "/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	target, err := ggml.Inspect(f, mem, base.Bias)
	if err != nil {
		t.Fatal(err)
	}
	if target.Version != "0.25.1" || !slices.Contains(target.Names.Ops, "MUL_MAT") || !slices.Contains(target.Names.GLU, "SWIGLU") {
		t.Fatalf("version %q, ops %v, GLU %v", target.Version, target.Names.Ops, target.Names.GLU)
	}
	for name, want := range map[string]ggml.TypeSize{"f32": {1, 4}, "f16": {1, 2}, "q4_0": {32, 18}, "q8_0": {32, 34}} {
		i := slices.Index(target.Names.Types, name)
		if got := target.Size(uint32(i)); i < 0 || got != want {
			t.Errorf("type %s (%d): size %+v, want %+v", name, i, got, want)
		}
	}
}
