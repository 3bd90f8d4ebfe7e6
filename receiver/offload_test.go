//go:build e2e

package receiver

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/signals"
	"github.com/profinfer/profinfer/internal/testbench"
)

// Offload to the RPC backend on loopback: llama-bench computes the first half of the 1B
// model's layers on its CPU and sends the second half to ggml-rpc-server, both profiled.
// The client's splits are named CPU and RPC from their functions, its copies into the RPC
// backend carry bytes, its CPU graphs hold only the layers it kept, and the server's node
// spans hold exactly the offloaded ones.
func TestE2ERPCOffload(t *testing.T) {
	e := testbench.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// llama.cpp counts the output layer among -ngl's: the last ngl-1 blocks and the
	// output go to the RPC server, and the scheduler may compute the block before them
	// on either side, since its last nodes feed the server's first.
	const layers, ngl = 16, 8
	const first = layers + 1 - ngl
	c := startCollectorOf(t, ctx, []string{e.Bin("llama-bench"), e.Bin("ggml-rpc-server")}, fullTracing)
	started := time.Now()
	srv, err := e.StartRPCServer(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitLogged(t, c, "attached", srv.PID(), started, 30*time.Second)
	bench, err := testbench.Start(e.Bin("llama-bench"), e.BenchArgs("llama-1b-q4_0", 0, 4, 2, 1,
		"--rpc", srv.Addr, "-ngl", strconv.Itoa(ngl))...)
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Stop()
	if err := bench.Wait(ctx); err != nil {
		t.Fatalf("llama-bench: %v\n%s", err, bench.Stderr.String())
	}
	// RPC's backend is linked into every process of the test bench's build: the client's
	// split probes come with its scheduler, made with the server's backend.
	if !attachedWith(c, bench.PID(), `"split_probes": false`) {
		t.Errorf("llama-bench attached with its split probes, before its scheduler was seen:\n%s", c.proc.Stderr.String())
	}
	time.Sleep(1500 * time.Millisecond) // one collection interval, for the metrics
	traces, metrics := c.stop(t)

	client, server := int64(bench.PID()), int64(srv.PID())
	splits := map[string]int{}
	var copied int64
	clientLayers, serverLayers := map[int]int{}, map[int]int{}
	cpuSplit := map[string]bool{}
	all := spans(traces)
	for _, s := range all {
		switch {
		case s.pid == client && s.name == "ggml.backend.graph_compute":
			b, _ := s.attrs["ggml.backend"].(string)
			splits[b]++
			cpuSplit[s.id] = b == "CPU"
		case s.pid == client && s.name == "ggml.backend.tensor_copy":
			n, _ := s.attrs["ggml.copy.bytes"].(int64)
			if s.attrs["ggml.backend.source"] == "CPU" && s.attrs["ggml.backend.destination"] == "RPC" {
				if n <= 0 {
					t.Errorf("copy of %v from CPU to RPC with %d bytes", s.attrs["ggml.tensor.name"], n)
				}
				copied += n
			}
		}
	}
	for _, s := range all {
		name, _ := s.attrs["ggml.tensor.name"].(string)
		l := signals.Layer(name)
		switch {
		case s.name == "ggml.graph_compute" && s.pid == client && !cpuSplit[s.parent]:
			t.Fatalf("client CPU graph not inside a CPU split: parent %s; splits %v", s.parent, splits)
		case s.attrs["ggml.op"] == nil || l < 0:
		case s.pid == client:
			clientLayers[l]++
		case s.pid == server:
			serverLayers[l]++
		}
	}
	t.Logf("client splits %v, %d bytes copied CPU to RPC; layers computed by the client %v, by the server %v", splits, copied, clientLayers, serverLayers)
	if splits["CPU"] == 0 || splits["RPC"] == 0 || copied == 0 {
		t.Fatalf("splits %v, %d bytes copied from CPU to RPC", splits, copied)
	}
	for l := range layers {
		c, s := clientLayers[l], serverLayers[l]
		switch {
		case l < first-1 && (c == 0 || s != 0), l >= first && (s == 0 || c != 0), l == first-1 && c+s == 0:
			t.Errorf("layer %d: %d nodes on the client, %d on the server; offloaded from layer %d", l, c, s, first)
		}
	}
	var metricBytes int64 // cumulative: the client's last export has the largest
	eachMetric(metrics, "ggml.backend.copy.bytes", func(m pmetric.Metric) {
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			dp := m.Sum().DataPoints().At(i)
			src, _ := dp.Attributes().Get("ggml.backend.source")
			dst, _ := dp.Attributes().Get("ggml.backend.destination")
			if src.Str() == "CPU" && dst.Str() == "RPC" {
				metricBytes = max(metricBytes, dp.IntValue())
			}
		}
	})
	if metricBytes != copied {
		t.Errorf("ggml.backend.copy.bytes CPU to RPC = %d, the copy spans add up to %d", metricBytes, copied)
	}
}
