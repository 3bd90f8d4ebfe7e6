package testbench

import (
	"context"
	"testing"
	"time"
)

var models = []string{"tiny-dense", "tiny-moe", "llama-1b-q4_0", "llama-1b-q8_0", "moe-q4_0"}

// Every generated model loads in the real llama.cpp and produces tokens.
func TestModelsRun(t *testing.T) {
	e := Require(t)
	for _, m := range models {
		t.Run(m, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rs, err := e.Bench(ctx, e.BenchArgs(m, 8, 4, 2, 1)...)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 2 {
				t.Fatalf("want a pp and a tg row, got %+v", rs)
			}
			for _, r := range rs {
				if r.AvgTS <= 0 {
					t.Errorf("no throughput in %+v", r)
				}
			}
		})
	}
}

// The shared and the static (portable) llama-server both serve completions.
func TestServerProducesTokens(t *testing.T) {
	e := Require(t)
	for _, exe := range []string{e.Bin("llama-server"), e.StaticServer()} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := e.StartServer(ctx, exe, "tiny-dense", 2)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		n, err := s.Complete(ctx, "The quick brown fox", 8)
		if err != nil {
			t.Fatal(err)
		}
		if n != 8 {
			t.Fatalf("%s generated %d tokens, want 8", exe, n)
		}
	}
}

// A client offloads every layer to ggml-rpc-server on loopback and still produces tokens.
func TestRPCOffloadProducesTokens(t *testing.T) {
	e := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := e.StartRPCServer(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	rs, err := e.Bench(ctx, e.BenchArgs("tiny-dense", 8, 4, 1, 1, "--rpc", s.Addr, "-ngl", "99")...)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[1].NGen != 4 || rs[1].AvgTS <= 0 {
		t.Fatalf("unexpected results %+v", rs)
	}
}

func TestNodeDriverProducesTokens(t *testing.T) {
	e := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := Run(ctx, "node", e.NodeArgs("tiny-dense", 8, 2, 1)...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseNode(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tokens < 1 || r.PID <= 0 {
		t.Fatalf("node driver produced %+v", r)
	}
}

// Stop ends a process and everything it started; Wait reports a failed exit.
func TestProcessLifecycle(t *testing.T) {
	p, err := Start("sh", "-c", "sleep 60 & sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if !p.Exited() {
		t.Fatal("process still running after Stop")
	}
	if _, err := Run(context.Background(), "false"); err == nil {
		t.Fatal("Run of false succeeded")
	}
}
