/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The runtime layer: the graphs the CPU backend computes, with their threads' CPU time,
 * and their nodes on each thread, with the barriers between them and the expert ids of
 * MoE nodes; graph builds, and the backend schedulers a runtime makes. */
#pragma once

#include "counters.bpf.h"
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define GRAPHS_MAX 4096 /* graphs whose nodes' detail was sent, over all processes */
#define THREADS_MAX 256 /* threads of a process whose CPU time a graph's entry and exit sum */

/* Traced processes whose graph builds are probed (tgid to 1); user space adds them. Their
 * thread 0 sends a node's detail (its tensor and sources) once per graph build, not at
 * every start: graphs are reused token after token, and the copy is most of what a node
 * start costs thread 0, on the critical path. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u8);
} remember SEC(".maps");

/* When a traced process last built a graph, or user space last asked for every detail
 * again (ns). One stamp for all processes: builds are rare. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} built SEC(".maps");

struct graph_key {
	u32 tgid;
	u32 pad;
	u64 graph;
};

/* Graphs whose nodes sent their detail, with the stamp they were computed under: computed
 * again under the same stamp, their nodes are those already described. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GRAPHS_MAX);
	__type(key, struct graph_key);
	__type(value, u64);
} described SEC(".maps");

/* What thread 0 of each graph being computed may skip, by tid modulo SLOTS: decided once
 * per graph, read at every node start. An array lookup is inlined, and costs one cache
 * line that inference has long evicted; a hash lookup costs several. */
struct slot {
	u32 tid;
	u32 known; /* the graph's nodes were described under the current stamp */
	u64 graph;
	/* The threads' walk (choose_walk): whether this graph's entry walked them, when the
	 * thread's last walked graph began, and the smallest work buffer it computed with. */
	u32 walking;
	u32 pad;
	u64 walked_at;
	u64 least_work;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, u32);
	__type(value, struct slot);
} slots SEC(".maps");

/* A walk of the calling process's thread list, summing their CPU time. */
struct thread_walk {
	struct list_head *pos, *head;
	u64 node_off; /* of thread_node in task_struct */
	struct threads_cpu sum;
};

/* Adds the thread at w->pos and steps to the next; false once the list is done: four
 * reads of kernel memory a thread. */
static __always_inline bool walk_thread(struct thread_walk *w)
{
	if (!w->pos || w->pos == w->head)
		return 0;
	struct task_struct *t = (void *)w->pos - w->node_off;
	w->sum.run_ns += BPF_CORE_READ(t, se.sum_exec_runtime);
	if (bpf_core_field_exists(t->sched_info))
		w->sum.wait_ns += BPF_CORE_READ(t, sched_info.run_delay);
	w->sum.maj_flt += BPF_CORE_READ(t, maj_flt);
	w->sum.threads++;
	w->pos = BPF_CORE_READ(t, thread_node.next);
	return 1;
}

/* bpf_loop's callback. */
static long walk_thread_cb(u64 i, void *w)
{
	return !walk_thread(w);
}

/* Sums the CPU time of the calling process's threads, walking its thread list under the
 * RCU read lock the program runs in. With bpf_loop (loop) the verifier checks one step;
 * the bounded loop it checks THREADS_MAX times, some 13 000 instructions a program,
 * which is most of the CPU a start spends in the verifier. The threads that exited left
 * their runtime and faults in the signal struct: a graph that makes and ends threads of
 * its own (ggml's threadpool without OpenMP makes one per graph) counts theirs too. Their
 * run-queue wait the kernel keeps nowhere. */
static __always_inline void read_threads_cpu(struct threads_cpu *out, bool loop)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct signal_struct *sig = BPF_CORE_READ(task, signal);
	struct thread_walk w = {
		.pos = BPF_CORE_READ(sig, thread_head.next),
		.head = __builtin_preserve_access_index(&sig->thread_head),
		.node_off = bpf_core_field_offset(struct task_struct, thread_node),
	};
	if (loop)
		bpf_loop(THREADS_MAX, walk_thread_cb, &w, 0);
	else
		for (u32 i = 0; i < THREADS_MAX && walk_thread(&w); i++)
			;
	w.sum.partial = w.pos && w.pos != w.head;
	w.sum.run_ns += BPF_CORE_READ(sig, sum_sched_runtime);
	w.sum.maj_flt += BPF_CORE_READ(sig, maj_flt);
	*out = w.sum;
}

/* emit for a graph's entry and exit, with the process's threads' CPU time and faults
 * where walk is set (choose_walk), none (0 threads: not known) where not. */
static __always_inline int emit_graph(u16 kind, u64 a, u64 b, u16 nth, bool walk, bool loop)
{
	struct graph_record *g = bpf_ringbuf_reserve(&events, sizeof(*g), 0);
	if (!g) {
		dropped();
		return 0;
	}
	fill(&g->ev, kind, a, b, 0, nth, 0);
	if (walk)
		read_threads_cpu(&g->cpu, loop);
	else
		__builtin_memset(&g->cpu, 0, sizeof(g->cpu));
	bpf_ringbuf_submit(g, submit_flags(&g->ev));
	return 0;
}

#define WALK_GAP_NS 50000000ULL /* 50 ms: a one-token decode's graphs walked at most 20 a second */

/* Whether the graph the calling thread begins walks its process's threads at entry and
 * exit, a few cold reads a thread, most of what a graph's probes cost (7 us a walk in a
 * server of 11 threads). Every verdict on a phase stands on these sums, over its graphs,
 * so not every graph needs them: a graph whose work buffer (ggml_cplan.work_size, which
 * grows with the batch's tokens) is the smallest its thread has run, a one-token
 * decode's, is walked once WALK_GAP_NS has passed since its thread's last walked graph
 * began; a larger one (a prompt's, few and long) always, as is a thread's first graph
 * and every graph of a sampling window. */
static __always_inline bool choose_walk(struct slot *sl, u32 tid, u64 work, bool window)
{
	u64 now = bpf_ktime_get_ns();
	bool walk = window || sl->tid != tid || work > sl->least_work || now - sl->walked_at >= WALK_GAP_NS;
	if (sl->tid != tid || work < sl->least_work)
		sl->least_work = work;
	if (walk)
		sl->walked_at = now;
	sl->walking = walk;
	return walk;
}

/* Decides, as the calling thread (thread 0) starts computing graph, whether its node
 * starts may skip the detail: the graph was computed before under the current stamp, so
 * its nodes were described then. Otherwise they will be now. And whether the graph
 * walks the threads (choose_walk). */
static __always_inline bool remember_graph(void *graph, u64 work, bool window)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 zero = 0, tid = (u32)id, tgid = id >> 32, at = tid & (SLOTS - 1);
	struct slot *sl = bpf_map_lookup_elem(&slots, &at);
	u64 *stamp = bpf_map_lookup_elem(&built, &zero);
	if (!sl || !stamp)
		return 1;
	bool walk = choose_walk(sl, tid, work, window);
	sl->tid = tid;
	sl->known = 0;
	sl->graph = 0;
	if (!bpf_map_lookup_elem(&remember, &tgid))
		return walk;
	struct graph_key key = {.tgid = tgid, .graph = (u64)graph};
	u64 *seen = bpf_map_lookup_elem(&described, &key);
	if (seen && *seen == *stamp) {
		sl->known = 1;
		return walk;
	}
	sl->graph = (u64)graph;
	u64 now = *stamp;
	bpf_map_update_elem(&described, &key, &now, BPF_ANY);
	return walk;
}

/* Whether the graph the calling thread ends walked the threads at its entry. */
static __always_inline bool walking(void)
{
	u32 tid = bpf_get_current_pid_tgid(), at = tid & (SLOTS - 1);
	struct slot *sl = bpf_map_lookup_elem(&slots, &at);
	return !sl || (sl->tid == tid && sl->walking);
}

/* ggml_graph_compute(cgraph, cplan): the CPU backend's graph, on the calling thread. A
 * variant of each probe walks the threads with bpf_loop, the other without (before 5.17). */
static __always_inline int graph_start(struct pt_regs *ctx, bool loop)
{
	void *graph = (void *)PT_REGS_PARM1(ctx);
	void *plan = (void *)PT_REGS_PARM2(ctx);
	s32 nodes = 0, threads = 0;
	u64 work = 0; /* ggml_cplan.work_size, its first field in every release */
	bpf_probe_read_user(&nodes, sizeof(nodes), graph + graph_nnodes_off);
	bpf_probe_read_user(&threads, sizeof(threads), plan + cplan_nthreads_off);
	bpf_probe_read_user(&work, sizeof(work), plan);
	bool window = window_graph() || all_traced;
	bool walk = remember_graph(graph, work, window);
	struct split_slot *split = open_split(bpf_get_current_pid_tgid());
	if (split)
		split->cpu = 1;
	return emit_graph(EV_GRAPH_ENTER, (u64)graph, (u64)nodes, (u16)threads, walk, loop);
}

static __always_inline int graph_end(struct pt_regs *ctx, bool loop)
{
	return emit_graph(EV_GRAPH_EXIT, (u64)(s32)PT_REGS_RC(ctx), lost_so_far(), 0, walking(), loop);
}

SEC("uprobe/ggml_graph_compute")
int graph_enter(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return graph_start(ctx, 1);
}

SEC("uprobe/ggml_graph_compute")
int graph_enter_bounded(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return graph_start(ctx, 0);
}

SEC("uretprobe/ggml_graph_compute")
int graph_exit(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return graph_end(ctx, 1);
}

SEC("uretprobe/ggml_graph_compute")
int graph_exit_bounded(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return graph_end(ctx, 0);
}

/* ggml_backend_sched_new(backends, bufts, n_backends, ...): a backend scheduler is made,
 * once per context. a is its backends' count: with the CPU's alone, each split is a CPU
 * graph, which the graph probes see, and the split probes are left off. */
SEC("uprobe/ggml_backend_sched_new")
int sched_new(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_SCHED_NEW, (u64)(s32)PT_REGS_PARM3(ctx), 0, 0, 0, 0);
}

/* ggml_backend_sched_graph_compute_async(sched, graph), probed only until it is hit once,
 * where profinfer came after the scheduler was made: a is its backends' count, as
 * sched_new's, read from the scheduler. */
SEC("uprobe/ggml_backend_sched_graph_compute_async")
int sched_read(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	s32 n = 0;
	bpf_probe_read_user(&n, sizeof(n), (void *)PT_REGS_PARM1(ctx) + sched_n_backends_off);
	return emit(EV_SCHED_NEW, (u64)n, 0, 0, 0, 0);
}

/* Copies n rows of nb1 bytes from data into a record with room for cap bytes, a constant
 * once inlined, as the ring buffer wants. */
static __always_inline void emit_rows(u32 cap, void *ids, void *data, u64 nb1, s64 rows, u64 n)
{
	struct experts *x = bpf_ringbuf_reserve(&events, sizeof(x->ev) + cap, 0);
	if (!x) {
		dropped();
		return;
	}
	fill(&x->ev, EV_EXPERTS, (u64)ids, nb1, rows > 0xffff ? 0xffff : (u16)rows, (u16)n, 0);
	/* n * nb1 is 1 to cap bytes. The read's length is derived from it with a mask, right
	 * before the call: a check alone bounds one register, and 6.1's verifier loses the
	 * bound of the copy clang spills and reloads for the call. */
	u64 size = n * nb1;
	if (size > cap) {
		x->ev.nth = 0;
	} else {
		u64 len = (size - 1) & (cap - 1);
		barrier_var(len);
		if (bpf_probe_read_user(x->rows, len + 1, data))
			x->ev.nth = 0;
	}
	bpf_ringbuf_submit(x, wakeup());
}

/* MoE routing: a node whose third source is an I32 tensor (MUL_MAT_ID, ADD_ID) reads the
 * expert ids the router chose for each token. They are copied as the node starts, after
 * the router's nodes have finished and before the next token's router overwrites them. */
static __always_inline void emit_experts(void *ids, s64 rows)
{
	u64 nb1 = 0;
	void *data = 0;
	bpf_probe_read_user(&nb1, sizeof(nb1), ids + tensor_nb_off + 8);
	bpf_probe_read_user(&data, sizeof(data), ids + tensor_data_off);
	if (!nb1 || nb1 > IDS_MAX || rows <= 0)
		return;
	u64 n = IDS_MAX / nb1; /* rows that fit */
	if (n > (u64)rows)
		n = rows;
	if (n * nb1 <= IDS_SMALL)
		emit_rows(IDS_SMALL, ids, data, nb1, rows, n);
	else
		emit_rows(IDS_MAX, ids, data, nb1, rows, n);
}

/* A node starts on one thread. Thread 0 also describes it. */
static __always_inline int node_start(struct pt_regs *ctx, void *tensor, void *tensor2, u16 flags)
{
	struct {
		s32 ith, nth;
	} params = {};
	bpf_probe_read_user(&params, sizeof(params), (void *)PT_REGS_PARM1(ctx));
	if (params.ith != 0) {
		if (!all_threads)
			return 0;
		return emit_counted(EV_NODE, (u64)tensor, (u64)tensor2, params.ith, params.nth, flags);
	}

	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id, at = tid & (SLOTS - 1);
	struct slot *sl = bpf_map_lookup_elem(&slots, &at);
	/* Not with perf counters: with the short record taken, most counter reads of every
	 * thread failed (TestE2ECounters; why is not understood yet), and counters already
	 * cost more than the detail. */
	if (!n_counters && sl && sl->tid == tid && sl->known)
		return emit_counted(EV_NODE, (u64)tensor, (u64)tensor2, 0, params.nth, flags | NODE_KNOWN);

	struct detail *d = bpf_ringbuf_reserve(&events, sizeof(*d), 0);
	if (!d) {
		dropped();
		return 0;
	}
	fill(&d->ev, EV_NODE_DETAIL, (u64)tensor, (u64)tensor2, 0, params.nth, flags);
	void *ids = 0;
	s64 ids_rows = 0;
	if (n_counters)
		d->ev.flags |= read_counters(d->ev.tid, &d->counters);
	describe(d, tensor, &ids, &ids_rows);
	bpf_ringbuf_submit(d, wakeup());
	if (ids) {
		emit_experts(ids, ids_rows);
		/* Routing changes every token and is read at the node start: a graph with MoE
		 * nodes is described at every computation. */
		if (sl && sl->tid == tid && sl->graph) {
			struct graph_key g = {.tgid = id >> 32, .graph = sl->graph};
			bpf_map_delete_elem(&described, &g);
		}
	}
	return 0;
}

/* ggml_cpu_extra_compute_forward(params, tensor): called first for every non-fused node
 * on every thread, whichever kernel then computes it. */
SEC("uprobe/ggml_cpu_extra_compute_forward")
int node_enter(struct pt_regs *ctx)
{
	return node_start(ctx, (void *)PT_REGS_PARM2(ctx), 0, 0);
}

/* ggml_compute_forward_rms_norm_mul_fused(params, rms_norm, mul): two nodes in one kernel,
 * bypassing the dispatcher. */
SEC("uprobe/ggml_compute_forward_rms_norm_mul_fused")
int fused_enter(struct pt_regs *ctx)
{
	return node_start(ctx, (void *)PT_REGS_PARM2(ctx), (void *)PT_REGS_PARM3(ctx), NODE_FUSED);
}

/* ggml_new_graph_custom(ctx, size, grads): a graph is built, and with it the tensors it
 * computes, which may sit where the last build's did: their detail is sent again. */
SEC("uprobe/ggml_new_graph_custom")
int graph_new(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	u32 zero = 0;
	u64 *b = bpf_map_lookup_elem(&built, &zero);
	if (b)
		*b = bpf_ktime_get_ns();
	return 0;
}

/* ggml_barrier(threadpool): every thread calls it after every node (and inside some
 * kernels); the last call before the next node start ends the thread's share of a node. */
SEC("uprobe/ggml_barrier")
int barrier_enter(struct pt_regs *ctx)
{
	return emit(EV_BARRIER, 0, 0, 0, 0, 0);
}
