/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What the programs of every layer share: skipping untraced processes, sampling windows,
 * filling, sending and counting records, and describing tensors. */
#pragma once

#include "maps.bpf.h"

/* The lasting probes (decodes, graphs, splits, copies) are placed once per file, for
 * every process that maps it (user space's probe.Pool): a process's start and exit then
 * place and remove none. Those of a process profinfer does not trace return at once. */
static __always_inline bool untraced(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return !bpf_map_lookup_elem(&traced, &tgid);
}

/* The calling thread's split slot, if it holds the thread's open split. */
static __always_inline struct split_slot *open_split(u32 tid)
{
	u32 at = tid & (SLOTS - 1);
	struct split_slot *s = bpf_map_lookup_elem(&split_slots, &at);
	return s && s->tid == tid && s->graph ? s : 0;
}

static __always_inline void dropped(void)
{
	u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
	u64 *n = bpf_map_lookup_elem(&drops, &zero);
	if (n)
		(*n)++;
	n = bpf_map_lookup_elem(&lost, &tgid);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* The calling process's lost records so far. */
static __always_inline u64 lost_so_far(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	u64 *n = bpf_map_lookup_elem(&lost, &tgid);
	return n ? *n : 0;
}

/* Copies the calling thread's scheduler counters, zero if the scheduler layer is off. */
static __always_inline void read_sched(u32 tid, struct sched *out)
{
	struct thread *t = follow_sched ? bpf_map_lookup_elem(&threads, &tid) : 0;
	if (t)
		*out = t->sched;
	else
		__builtin_memset(out, 0, sizeof(*out));
}

/* Flags for bpf_ringbuf_submit: wake the reader only when it has a backlog. */
static __always_inline u64 wakeup(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* A sampling window counts the graphs that start in it; the end of the last wakes the
 * reader, which closes the window: every graph traced past it costs a probe hit per node.
 * One wakeup per window, not per graph: each takes a context switch on the cores the
 * model runs on. A graph computed by llama_decode reaches the reader only with its
 * decode's exit, which may come after the reader has woken for the graph's: until the
 * reader closes the window, its spent count (WINDOW_SPENT) has every graph and decode end
 * wake it. */
#define WINDOW_LAST 0xfffffffe  /* the graph being computed is the window's last */
#define WINDOW_SPENT 0xffffffff /* the window's graphs are computed */

/* Counts a graph start into the calling process's window; whether it is in one. */
static __always_inline bool window_graph(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	u32 *left = bpf_map_lookup_elem(&traced, &tgid);
	if (!left || !*left || *left >= WINDOW_LAST)
		return 0;
	/* Not atomic: one thread computes a process's graphs. Were two to race, the wakeup
	 * would come a graph late, or the reader's own tick would close the window. */
	if (--*left == 0)
		*left = WINDOW_LAST;
	return 1;
}

/* Whether a device's split handed over now has its nodes described: every graph is
 * traced, or a window has not been closed yet. A window counts the CPU's graphs, and a
 * device's split often follows the CPU graph that spent it (the embedding rows, then
 * every layer on the GPU), before the reader closes it. */
static __always_inline bool device_traced(void)
{
	if (all_traced)
		return 1;
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	u32 *left = bpf_map_lookup_elem(&traced, &tgid);
	return left && *left;
}

static __always_inline u64 window_wakeup(u32 tgid, bool graph_end)
{
	u32 *left = bpf_map_lookup_elem(&traced, &tgid);
	if (!left)
		return wakeup();
	if (*left == WINDOW_SPENT)
		return BPF_RB_FORCE_WAKEUP;
	if (graph_end && *left == WINDOW_LAST) {
		*left = WINDOW_SPENT;
		return BPF_RB_FORCE_WAKEUP;
	}
	return wakeup();
}

static __always_inline void fill(struct event *e, u16 kind, u64 a, u64 b, u16 ith, u16 nth, u16 flags)
{
	u64 id = bpf_get_current_pid_tgid();
	e->ts = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = (u32)id;
	e->kind = kind;
	e->ith = ith;
	e->nth = nth;
	e->flags = flags;
	e->a = a;
	e->b = b;
	read_sched((u32)id, &e->sched);
}

/* A record of kind on thread task, of a traced process: 0 where the process is not
 * traced, or the ring is full (counted as dropped). */
static __always_inline struct event *task_record(struct task_struct *task, u16 kind)
{
	u32 tgid = task->tgid;
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		dropped();
		return 0;
	}
	fill(e, kind, 0, 0, 0, 0, 0);
	e->pid = tgid;
	e->tid = task->pid;
	return e;
}

/* Flags for submitting e: the exits of graphs and decodes may close a window; a new
 * scheduler may want the split probes placed before its first decode. */
static __always_inline u64 submit_flags(struct event *e)
{
	if (e->kind == EV_GRAPH_EXIT || e->kind == EV_DECODE_EXIT || e->kind == EV_STEP_EXIT)
		return window_wakeup(e->pid, e->kind == EV_GRAPH_EXIT);
	if (e->kind == EV_SCHED_NEW)
		return BPF_RB_FORCE_WAKEUP;
	return wakeup();
}

static __always_inline int emit(u16 kind, u64 a, u64 b, u16 ith, u16 nth, u16 flags)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		dropped();
		return 0;
	}
	fill(e, kind, a, b, ith, nth, flags);
	bpf_ringbuf_submit(e, submit_flags(e));
	return 0;
}

/* Copies the tensor and the heads of its first sources into d: all user space needs to
 * name, type and shape a node, and where those sources' data comes from, which links the
 * node to the nodes that produced it. A MoE node's I32 third source (its expert ids) is
 * returned in ids, with its rows. */
static __always_inline void describe(struct detail *d, void *tensor, void **ids, s64 *ids_rows)
{
	u32 size = tensor_size;
	if (size > TENSOR_MAX)
		size = TENSOR_MAX;
	if (bpf_probe_read_user(d->tensor, size, tensor))
		__builtin_memset(d->tensor, 0, sizeof(d->tensor));
	for (int i = 0; i < N_SRC; i++) {
		/* The source pointers are in the copy already: no user read. */
		u32 off = tensor_src_off + 8 * i;
		void *src = 0;
		if (off <= TENSOR_MAX - 8)
			src = *(void **)(d->tensor + off);
		d->src_view[i] = 0;
		if (!src || bpf_probe_read_user(d->src[i], SRC_HEAD, src)) {
			__builtin_memset(d->src[i], 0, SRC_HEAD);
			continue;
		}
		bpf_probe_read_user(&d->src_view[i], sizeof(d->src_view[i]), src + tensor_view_src_off);
		if (i == 2 && *(u32 *)d->src[2] == type_i32) {
			*ids = src;
			*ids_rows = *(s64 *)(d->src[2] + tensor_ne_off + 8); /* ne[1]: tokens */
		}
	}
}
