/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The device layer: the splits the backend scheduler hands to each backend, with the
 * nodes of a device's split read from its graph; the CPU's waits for a device; copies
 * between backends' buffers; and ggml-vulkan's own node times. */
#pragma once

#include "helpers.bpf.h"
#include <bpf/bpf_tracing.h>

#define SPLIT_NODES_MAX 16384 /* nodes of a device's split described in a window */

/* ggml_backend_graph_compute_async(backend, cgraph): the scheduler hands one split of the
 * graph to one backend. The backend is named by its get_name function, which user space
 * resolves to a symbol of the target (ggml_backend_cpu_get_name, ggml_backend_vk_name); a
 * is that function, b the backend, ith the split's nodes. A GPU backend returns once the
 * work is queued: its completion shows where the CPU waits for it (sync_enter). */
SEC("uprobe/ggml_backend_graph_compute_async")
int split_enter(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	void *backend = (void *)PT_REGS_PARM1(ctx);
	void *graph = (void *)PT_REGS_PARM2(ctx);
	u64 get_name = 0;
	s32 nodes = 0;
	bpf_probe_read_user(&get_name, sizeof(get_name), backend + backend_get_name_off);
	bpf_probe_read_user(&nodes, sizeof(nodes), graph + graph_nnodes_off);
	u32 tid = bpf_get_current_pid_tgid(), at = tid & (SLOTS - 1);
	struct split_slot *sl = bpf_map_lookup_elem(&split_slots, &at);
	if (sl) {
		sl->tid = tid;
		sl->cpu = 0;
		sl->graph = (u64)graph;
	}
	return emit(EV_SPLIT_ENTER, get_name, (u64)backend, nodes > 0xffff ? 0xffff : (u16)nodes, 0, 0);
}

/* A walk of a split's nodes, each described in a record of its own. */
struct node_walk {
	void **nodes;
	u32 n;
};

/* bpf_loop's callback: describes node i (EV_SPLIT_NODE: a the tensor, ith its index, nth
 * the split's nodes). */
static long split_node_cb(u64 i, void *ctx)
{
	struct node_walk *w = ctx;
	void *tensor = 0;
	if (bpf_probe_read_user(&tensor, sizeof(tensor), w->nodes + i) || !tensor)
		return 0;
	struct detail *d = bpf_ringbuf_reserve(&events, sizeof(*d), 0);
	if (!d) {
		dropped();
		return 1;
	}
	fill(&d->ev, EV_SPLIT_NODE, (u64)tensor, 0, (u16)i, (u16)w->n, 0);
	void *ids = 0;
	s64 rows = 0;
	describe(d, tensor, &ids, &rows);
	bpf_ringbuf_submit(d, wakeup());
	return 0;
}

/* At a split's return: a split that no CPU graph computed went to another device, which
 * has no probe on its nodes; when device_traced(), they are read from the graph instead, a
 * record each. Without bpf_loop (before 5.17) they are not. */
static __always_inline int split_end(struct pt_regs *ctx, bool loop)
{
	u32 tid = bpf_get_current_pid_tgid();
	struct split_slot *sl = open_split(tid);
	if (sl) {
		void *graph = (void *)sl->graph;
		bool device = !sl->cpu;
		sl->graph = 0;
		if (device && loop && device_traced()) {
			struct node_walk w = {};
			s32 n = 0;
			bpf_probe_read_user(&n, sizeof(n), graph + graph_nnodes_off);
			bpf_probe_read_user(&w.nodes, sizeof(w.nodes), graph + graph_nodes_off);
			if (n > SPLIT_NODES_MAX)
				n = SPLIT_NODES_MAX;
			if (n > 0 && w.nodes) {
				w.n = n;
				bpf_loop(n, split_node_cb, &w, 0);
			}
		}
	}
	return emit(EV_SPLIT_EXIT, (u64)(s32)PT_REGS_RC(ctx), 0, 0, 0, 0);
}

SEC("uretprobe/ggml_backend_graph_compute_async")
int split_exit(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return split_end(ctx, 1);
}

SEC("uretprobe/ggml_backend_graph_compute_async")
int split_exit_bounded(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return split_end(ctx, 0);
}

/* The backend's own synchronize(backend), or ggml_backend_synchronize(backend): the CPU
 * waits for a backend's queued work, which is when a GPU's split is seen to end. a is the
 * backend's get_name, b the backend. Attached to a process once it computes a split on a
 * backend other than the CPU's. */
SEC("uprobe/ggml_backend_synchronize")
int sync_enter(struct pt_regs *ctx)
{
	void *backend = (void *)PT_REGS_PARM1(ctx);
	u64 get_name = 0;
	bpf_probe_read_user(&get_name, sizeof(get_name), backend + backend_get_name_off);
	return emit(EV_SYNC_ENTER, get_name, (u64)backend, 0, 0, 0);
}

SEC("uretprobe/ggml_backend_synchronize")
int sync_exit(struct pt_regs *ctx)
{
	return emit(EV_SYNC_EXIT, 0, 0, 0, 0, 0);
}

/* ggml-vulkan's perf logger (GGML_VK_PERF_LOGGER): after a graph, the device's timestamps
 * around each node give its time, which the logger files under a label it builds from the
 * node (vk_perf_logger::get_node_fusion_name: op, type, shape, fusion), then prints and
 * clears. The node is seen at the label's making, its time at the print: user space pairs
 * the k-th node of a label with the label's k-th time. Attached only to a process whose
 * logger is on, which already makes every graph wait for the device. */

#define TIMES_KEPT 256    /* times of one label sent at a print: the newest */
#define TIMES_STEPS 16384 /* steps of a print's walk: a record, or a move in the tree */

/* The node whose label a thread is making, by tid modulo SLOTS. */
struct label_slot {
	u32 tid;
	u32 pad;
	u64 node;
	u64 label; /* the std::string being returned */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, u32);
	__type(value, struct label_slot);
} label_slots SEC(".maps");

/* libstdc++'s std::string, std::map and std::vector, as the logger holds its labels:
 * map<string, vector<uint64_t>>. The C++ ABI fixes these offsets. */
#define STR_DATA 0   /* std::string: char *, then the length */
#define MAP_HEADER 8 /* std::map: the tree's header node, whose parent link is the root */
#define MAP_ROOT 16
#define MAP_LEFTMOST 24 /* the header's left link: the first entry */
#define MAP_COUNT 40
#define RB_PARENT 8  /* a red-black tree node */
#define RB_LEFT 16
#define RB_RIGHT 24
#define RB_KEY 32    /* the node's value: the label, then its times */
#define RB_TIMES 64  /* std::vector: begin, end */

/* get_node_fusion_name(this, node, fusion_name, n_flops), returning a std::string. */
SEC("uprobe/vk_perf_logger_get_node_fusion_name")
int label_enter(struct pt_regs *ctx)
{
	u32 tid = bpf_get_current_pid_tgid(), at = tid & (SLOTS - 1);
	struct label_slot *sl = bpf_map_lookup_elem(&label_slots, &at);
	if (sl) {
		sl->tid = tid;
		sl->label = PT_REGS_PARM1(ctx);
		sl->node = PT_REGS_PARM3(ctx);
	}
	return 0;
}

/* EV_TIMED_NODE: a the node; described as a split's node is, with its label. */
SEC("uretprobe/vk_perf_logger_get_node_fusion_name")
int label_exit(struct pt_regs *ctx)
{
	u32 tid = bpf_get_current_pid_tgid(), at = tid & (SLOTS - 1);
	struct label_slot *sl = bpf_map_lookup_elem(&label_slots, &at);
	if (!sl || sl->tid != tid || !sl->node)
		return 0;
	void *node = (void *)sl->node, *label = (void *)sl->label;
	sl->node = 0;
	struct timed_node *t = bpf_ringbuf_reserve(&events, sizeof(*t), 0);
	if (!t) {
		dropped();
		return 0;
	}
	fill(&t->d.ev, EV_TIMED_NODE, (u64)node, 0, 0, 0, 0);
	void *ids = 0;
	s64 rows = 0;
	describe(&t->d, node, &ids, &rows);
	char *s = 0;
	bpf_probe_read_user(&s, sizeof(s), label + STR_DATA);
	if (bpf_probe_read_user_str(t->label, sizeof(t->label), s) < 0)
		t->label[0] = 0;
	bpf_ringbuf_submit(t, wakeup());
	return 0;
}

/* A walk of the logger's labels in the map's order, sending each one's newest times. Each
 * step is a call of the loop's callback, and moves one link in the tree at most: the
 * verifier then checks a few straight paths, not a loop inside a loop. */
enum {
	WALK_ENTER, /* read the entry's label and times */
	WALK_SEND,  /* send a chunk of its times; then on to the next entry, */
	WALK_DOWN,  /* the leftmost of the right subtree, */
	WALK_UP,    /* or the first ancestor the entry lies left of */
};

struct times_walk {
	void *entry;
	char *label;
	u64 *times;
	u32 n, next, base; /* times held, the next to send, the first sent */
	u32 left;          /* entries after this one */
	u32 step;
};

/* bpf_loop's callback: one step of the walk; WALK_SEND sends a chunk of an entry's
 * times, EV_DEVICE_TIMES. */
static long times_cb(u64 i, void *ctx)
{
	struct times_walk *w = ctx;
	void *next = 0;
	if (w->step == WALK_DOWN) {
		bpf_probe_read_user(&next, sizeof(next), w->entry + RB_LEFT);
		if (next)
			w->entry = next;
		else
			w->step = WALK_ENTER;
		return 0;
	}
	if (w->step == WALK_UP) {
		void *from = w->entry;
		bpf_probe_read_user(&next, sizeof(next), from + RB_PARENT);
		if (!next)
			return 1;
		w->entry = next;
		bpf_probe_read_user(&next, sizeof(next), w->entry + RB_RIGHT);
		if (next != from)
			w->step = WALK_ENTER;
		return 0;
	}
	if (w->step == WALK_ENTER) {
		u64 *end = 0;
		w->label = 0;
		bpf_probe_read_user(&w->label, sizeof(w->label), w->entry + RB_KEY + STR_DATA);
		w->times = 0;
		bpf_probe_read_user(&w->times, sizeof(w->times), w->entry + RB_TIMES);
		bpf_probe_read_user(&end, sizeof(end), w->entry + RB_TIMES + 8);
		w->n = end > w->times ? end - w->times : 0;
		w->base = w->n > TIMES_KEPT ? w->n - TIMES_KEPT : 0;
		w->next = w->base;
		w->step = WALK_SEND;
		return 0;
	}
	if (w->next >= w->n) {
		if (!w->left)
			return 1;
		w->left--;
		bpf_probe_read_user(&next, sizeof(next), w->entry + RB_RIGHT);
		if (next) {
			w->entry = next;
			w->step = WALK_DOWN;
		} else {
			w->step = WALK_UP;
		}
		return 0;
	}
	u32 cnt = w->n - w->next;
	if (cnt > TIMES_CHUNK)
		cnt = TIMES_CHUNK;
	struct device_times *t = bpf_ringbuf_reserve(&events, sizeof(*t), 0);
	if (!t) {
		dropped();
		return 1;
	}
	fill(&t->ev, EV_DEVICE_TIMES, w->n, 0, (u16)(w->next - w->base), (u16)cnt, 0);
	if (bpf_probe_read_user_str(t->label, sizeof(t->label), w->label) < 0)
		t->label[0] = 0;
	/* cnt is 1 to TIMES_CHUNK: the length is masked right before the call, as for the
	 * expert ids, so that the verifier keeps its bound. */
	u64 len = (cnt * sizeof(u64) - 1) & (sizeof(t->ns) - 1);
	barrier_var(len);
	if (bpf_probe_read_user(t->ns, len + 1, w->times + w->next))
		t->ev.nth = 0;
	bpf_ringbuf_submit(t, wakeup());
	w->next += cnt;
	return 0;
}

/* print_timings(this, force), where the logger prints its labels' times and clears them. */
SEC("uprobe/vk_perf_logger_print_timings")
int times_print(struct pt_regs *ctx)
{
	void *logger = (void *)PT_REGS_PARM1(ctx);
	u64 count = 0;
	void *root = 0, *up = 0;
	struct times_walk w = {};
	bpf_probe_read_user(&count, sizeof(count), logger + MAP_COUNT);
	bpf_probe_read_user(&w.entry, sizeof(w.entry), logger + MAP_LEFTMOST);
	bpf_probe_read_user(&root, sizeof(root), logger + MAP_ROOT);
	if (root)
		bpf_probe_read_user(&up, sizeof(up), root + RB_PARENT);
	/* The root's parent is the header: libstdc++'s layout, not another library's. */
	if (!count || !w.entry || up != logger + MAP_HEADER)
		return 0;
	w.left = count - 1;
	w.step = WALK_ENTER;
	bpf_loop(TIMES_STEPS, times_cb, &w, 0);
	return 0;
}

/* The get_base function of the buffer a tensor lives in: it names the buffer's backend. */
static __always_inline u64 buffer_fn(void *tensor)
{
	void *buffer = 0;
	u64 fn = 0;
	bpf_probe_read_user(&buffer, sizeof(buffer), tensor + tensor_buffer_off);
	if (buffer)
		bpf_probe_read_user(&fn, sizeof(fn), buffer + buffer_get_base_off);
	return fn;
}

/* A copy of tensor src between buffers: the record carries the source tensor (name, type
 * and shape give the bytes) and both buffers' get_base functions. */
static __always_inline int copy_start(void *src, void *dst, u16 flags)
{
	struct detail *d = bpf_ringbuf_reserve(&events, sizeof(*d), 0);
	if (!d) {
		dropped();
		return 0;
	}
	__builtin_memset(d, 0, sizeof(*d));
	fill(&d->ev, EV_COPY, buffer_fn(src), buffer_fn(dst), 0, 0, flags);
	u32 size = tensor_size;
	if (size > TENSOR_MAX)
		size = TENSOR_MAX;
	bpf_probe_read_user(d->tensor, size, src);
	bpf_ringbuf_submit(d, wakeup());
	return 0;
}

/* ggml_backend_tensor_copy(src, dst): the scheduler copies a split's input from the
 * backend that computed it to the one that reads it, and waits for it. */
SEC("uprobe/ggml_backend_tensor_copy")
int copy_enter(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return copy_start((void *)PT_REGS_PARM1(ctx), (void *)PT_REGS_PARM2(ctx), 0);
}

/* a is 1: the copy was made. */
SEC("uretprobe/ggml_backend_tensor_copy")
int copy_exit(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_COPY_EXIT, 1, 0, 0, 0, 0);
}

/* A GPU backend's cpy_tensor_async(backend_src, backend_dst, src, dst), which the
 * scheduler calls first: it queues the copy on the device, or returns false for the
 * scheduler to copy with ggml_backend_tensor_copy. Attached with the device probes. */
SEC("uprobe/cpy_tensor_async")
int copy_async_enter(struct pt_regs *ctx)
{
	return copy_start((void *)PT_REGS_PARM3(ctx), (void *)PT_REGS_PARM4(ctx), COPY_QUEUED);
}

/* a is the return value: whether the copy was queued. */
SEC("uretprobe/cpy_tensor_async")
int copy_async_exit(struct pt_regs *ctx)
{
	return emit(EV_COPY_EXIT, (u8)PT_REGS_RC(ctx), 0, 0, 0, 0);
}
