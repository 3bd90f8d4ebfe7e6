/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The counters layer: each thread's perf counter values, read where it starts a node and
 * where it ends its share of a graph, from the counters user space opens on each traced
 * thread, and on each new one as it starts. */
#pragma once

#include "helpers.bpf.h"
#include <bpf/bpf_tracing.h>

#define COUNTER_SLOTS 256 /* threads with counters open at once */

/* The perf events user space opened on traced threads: slot s holds the thread's
 * counters at s*MAX_COUNTERS onwards. bpf_perf_event_read_value reads a per-task event
 * only on its own task, which is the thread that hits the probe. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(max_entries, COUNTER_SLOTS * MAX_COUNTERS);
	__type(key, u32);
	__type(value, u32);
} counters SEC(".maps");

/* Slot of each thread with counters open (tid to slot), filled by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, COUNTER_SLOTS);
	__type(key, u32);
	__type(value, u32);
} counter_slots SEC(".maps");

/* Reads the calling thread's counters into out; COUNTED if it has them open. A
 * multiplexed hardware counter is scaled to the time it was enabled. */
static __always_inline u16 read_counters(u32 tid, struct counters *out)
{
	u32 *slot = bpf_map_lookup_elem(&counter_slots, &tid);
	if (!slot || *slot >= COUNTER_SLOTS)
		return 0;
	u32 base = *slot * MAX_COUNTERS;
	for (u32 i = 0; i < MAX_COUNTERS && i < n_counters; i++) {
		struct bpf_perf_event_value v;
		if (bpf_perf_event_read_value(&counters, base + i, &v, sizeof(v)))
			return 0;
		if (v.running && v.running < v.enabled)
			v.counter = v.counter * v.enabled / v.running;
		out->value[i] = v.counter;
	}
	return COUNTED;
}

/* emit, with the thread's counters when they are configured. */
static __always_inline int emit_counted(u16 kind, u64 a, u64 b, u16 ith, u16 nth, u16 flags)
{
	if (!n_counters)
		return emit(kind, a, b, ith, nth, flags);
	struct counted *c = bpf_ringbuf_reserve(&events, sizeof(*c), 0);
	if (!c) {
		dropped();
		return 0;
	}
	fill(&c->ev, kind, a, b, ith, nth, flags);
	c->ev.flags |= read_counters(c->ev.tid, &c->counters);
	bpf_ringbuf_submit(c, wakeup());
	return 0;
}

/* ggml_graph_compute_thread returns on every thread once the graph is done with it: the
 * counters read here close the thread's last node, and what follows until its next node
 * is outside nodes. Attached only with counters. */
SEC("uretprobe/ggml_graph_compute_thread")
int thread_exit(struct pt_regs *ctx)
{
	return emit_counted(EV_THREAD_EXIT, 0, 0, 0, 0, 0);
}

/* A traced process starts a thread: its perf counters are opened before it computes,
 * instead of when the reader first meets its records, which it reads on a timer. A wakeup
 * per thread started, attached only with counters configured. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(thread_start, struct task_struct *parent, struct task_struct *child)
{
	struct event *e = task_record(child, EV_THREAD_START);
	if (e)
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}
