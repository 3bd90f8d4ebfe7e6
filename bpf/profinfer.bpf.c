//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Uprobe programs for GGML runtimes. Each program does the least it can on the hot path:
 * read a few registers, reserve one ring-buffer record, fill it, submit. All pairing of
 * events into nodes, graphs and decodes happens in user space. Struct offsets of the
 * target's ggml version come in as read-only constants set at load time. */
#include "regs.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TENSOR_MAX 384 /* bytes of struct ggml_tensor copied; larger layouts are refused */
#define SRC_HEAD 48    /* type and ne[] of a source tensor */
#define N_SRC 3
#define IDS_SMALL 512  /* bytes of a MoE router's expert ids copied per node: decode */
#define IDS_MAX 16384  /* and prefill */
#define GRAPHS_MAX 4096 /* graphs whose nodes' detail was sent, over all processes */
#define SLOTS 1024      /* threads computing a graph at once; a power of two */
#define THREADS_MAX 256 /* threads of a process whose CPU time a graph's entry and exit sum */
#define SPLIT_NODES_MAX 16384 /* nodes of a device's split described in a window */
#define LABEL_MAX 256    /* bytes of an op's label sent, its NUL among them */
#define TIMES_CHUNK 32   /* times in one device_times record */
#define TIMES_KEPT 256   /* times of one label sent at a print: the newest */
#define TIMES_STEPS 16384 /* steps of a print's walk: a record, or a move in the tree */

enum kind {
	EV_DECODE_ENTER = 1,
	EV_DECODE_EXIT = 2,
	EV_GRAPH_ENTER = 3,
	EV_GRAPH_EXIT = 4,
	EV_NODE = 5,
	EV_NODE_DETAIL = 6,
	EV_BARRIER = 7,
	EV_THREAD_EXIT = 8,
	EV_EXPERTS = 9,
	EV_SPLIT_ENTER = 10,
	EV_SPLIT_EXIT = 11,
	EV_COPY = 12,
	EV_COPY_EXIT = 13,
	EV_SEQ_RM = 14,
	EV_THREAD_START = 15,
	EV_SPLIT_NODE = 16,
	EV_SYNC_ENTER = 17,
	EV_SYNC_EXIT = 18,
	EV_TIMED_NODE = 19,
	EV_DEVICE_TIMES = 20,
	EV_SCHED_NEW = 21,
	EV_STEP_ENTER = 22,
	EV_STEP_EXIT = 23,
	EV_JOB_ENTER = 24,
	EV_JOB_EXIT = 25,
};

/* Flags on events. */
#define NODE_FUSED 1 /* started by a fused kernel; tensor2 is the second node */
#define COUNTED 2    /* the record carries the thread's perf counter values */
#define NODE_KNOWN 4 /* thread 0's start of a node whose detail was sent since the last graph build */
#define COPY_QUEUED 1 /* a copy a device queues with its work, rather than makes before returning */
/* On a decode's entry: what its batch leaves out, and whether its sequences overflowed. */
#define BATCH_NO_POS 8       /* no positions: llama_decode places the tokens itself */
#define BATCH_NO_SEQ 16      /* no sequence ids: every token is sequence 0's */
#define BATCH_NO_OUTPUTS 32  /* no output flags: the last token's logits alone are computed */
#define BATCH_MORE_SEQS 64   /* tokens of more than MAX_SEQS sequences; those past it are not summed */
#define BATCH_SHARED 128     /* a token belongs to several sequences; it is summed into its first */
#define BATCH_TRUNCATED 256  /* more than MAX_BATCH tokens; those past it are not summed */

#define MAX_SEQS 16
#define MAX_BATCH 65536
#define BOUNDED_BATCH 2048 /* tokens summed where the kernel has no bpf_loop (before 5.17) */

#define MAX_COUNTERS 8
#define COUNTER_SLOTS 256 /* threads with counters open at once */

/* What the scheduler did to one thread, cumulative since profinfer first saw it switch. */
struct sched {
	u64 off_ns;      /* switched out */
	u64 runq_ns;     /* runnable but waiting for a CPU: preempted, or woken and not yet running */
	u32 preemptions; /* switched out while runnable */
	u32 migrations;  /* switched in on another CPU than last time */
};

struct event {
	u64 ts;
	u32 pid;
	u32 tid;
	u16 kind;
	u16 ith;
	u16 nth;
	u16 flags;
	u64 a; /* tensor, cgraph, token count or return value, by kind */
	u64 b; /* second tensor, node count, or at exits the process's lost records */
	struct sched sched; /* node starts and graph exits: the thread's counters */
};

/* Perf counter values of the thread, cumulative since user space opened them. */
struct counters {
	u64 value[MAX_COUNTERS];
};

struct detail {
	struct event ev;
	u8 tensor[TENSOR_MAX];
	u8 src[N_SRC][SRC_HEAD];
	u64 src_view[N_SRC]; /* each source's view_src: the tensor that owns its data, or 0 */
	struct counters counters;
};

/* An event with counters: node starts and thread exits, while counters are configured. */
struct counted {
	struct event ev;
	struct counters counters;
};

/* The expert ids a MoE node reads: rows of its ids tensor, one per token, each starting
 * with the ids of the experts used; a is the ids tensor, b its row stride, ith its rows
 * (tokens), nth the rows copied. A record has room for IDS_SMALL or IDS_MAX bytes. */
struct experts {
	struct event ev;
	u8 rows[IDS_MAX];
};

/* One sequence's tokens in a decode's batch: how many, the lowest and highest position
 * (-1 without positions), and how many ask for an output. */
struct seq_tokens {
	s32 seq;
	s32 tokens;
	s32 pos_min;
	s32 pos_max;
	s32 outputs;
};

/* A decode's entry with its batch summed per sequence: a is the batch's token count, b
 * the llama_context, nth the sequences in seqs, flags BATCH_*. */
struct batch {
	struct event ev;
	struct seq_tokens seqs[MAX_SEQS];
};

/* The CPU time of the calling process's threads so far, summed at a graph's entry and at
 * its exit: the difference says how much of the graph's wall time its threads had a CPU,
 * at a cost per graph rather than per switch. The kernel brings a running thread's
 * runtime up to date at scheduler ticks and switches, so a reading is exact to about a
 * tick per thread; over many graphs the errors cancel. */
struct threads_cpu {
	u64 run_ns;  /* se.sum_exec_runtime: time on a CPU */
	u64 wait_ns; /* sched_info.run_delay: runnable, waiting for a CPU; 0 without CONFIG_SCHED_INFO */
	u32 threads; /* threads summed */
	u32 partial; /* the process had more than THREADS_MAX threads; the rest were not summed */
};

/* A graph's entry or exit: a is the cgraph or the return value, b the node count or the
 * process's lost records, nth the threads computing it. */
struct graph_record {
	struct event ev;
	struct threads_cpu cpu;
};

/* A device's own timings of the nodes of one op label, as ggml-vulkan's perf logger holds
 * them when it prints: a is how many times the label holds, nth the times here, ith the
 * index of the first of them among the newest TIMES_KEPT. */
struct device_times {
	struct event ev;
	char label[LABEL_MAX];
	u64 ns[TIMES_CHUNK];
};

/* A node the device times (EV_TIMED_NODE), described, with the label its time is filed
 * under. */
struct timed_node {
	struct detail d;
	char label[LABEL_MAX];
};

/* Referenced so that bpf2go generates Go types for them. */
const struct event *unused_event __attribute__((unused));
const struct detail *unused_detail __attribute__((unused));
const struct counted *unused_counted __attribute__((unused));
const struct batch *unused_batch __attribute__((unused));
const struct graph_record *unused_graph_record __attribute__((unused));
const struct device_times *unused_device_times __attribute__((unused));
const struct timed_node *unused_timed_node __attribute__((unused));
const enum kind *unused_kind __attribute__((unused));

/* Set by the loader from the target's ggml layout. */
volatile const u32 tensor_size = 336;
volatile const u32 tensor_src_off = 152;
volatile const u32 tensor_view_src_off = 232;
volatile const u32 tensor_ne_off = 16;
volatile const u32 tensor_nb_off = 48;
volatile const u32 tensor_data_off = 248;
volatile const u32 tensor_buffer_off = 8;
volatile const u32 backend_get_name_off = 8; /* struct ggml_backend.iface.get_name */
volatile const u32 buffer_get_base_off = 8;  /* struct ggml_backend_buffer.iface.get_base */
volatile const u32 type_i32 = 26; /* enum ggml_type GGML_TYPE_I32 */
volatile const u32 graph_nnodes_off = 4;
volatile const u32 graph_nodes_off = 16; /* struct ggml_cgraph.nodes */
volatile const u32 cplan_nthreads_off = 16;
volatile const u32 sched_n_backends_off = 4; /* struct ggml_backend_sched.n_backends, after two bools */
volatile const u32 batch_stack_off = 8; /* llama_batch.n_tokens relative to sp at the probe (x86-64) */
volatile const u32 batch_pos_off = 24;      /* llama_batch.pos */
volatile const u32 batch_n_seq_id_off = 32; /* llama_batch.n_seq_id */
volatile const u32 batch_seq_id_off = 40;   /* llama_batch.seq_id */
volatile const u32 batch_logits_off = 48;   /* llama_batch.logits */
/* Unread bytes in the ring buffer from which a record wakes the reader. Below it records
 * are submitted silently and the reader polls on a timer: a wakeup per record would cost
 * the traced thread an irq_work and the reader a context switch, on the cores the model
 * runs on. */
volatile const u64 wakeup_bytes = 1 << 20;
/* Whether node starts on threads other than 0 are recorded. Thread 0 alone delimits
 * nodes: it starts the next one only after the barrier released every thread. The others
 * are needed only with the barrier probe, for per-thread busy time. */
volatile const u8 all_threads = 1;
/* Whether the scheduler programs are attached; without them every event skips the lookup. */
volatile const u8 follow_sched = 0;
/* Whether every graph is traced (full tracing), or only those a sampling window traces:
 * each sums its threads' CPU time (the walk costs a few cold reads a thread, and a server
 * has a thread per core for HTTP besides its compute threads), and a device's splits have
 * their nodes read. */
volatile const u8 all_traced = 0;
/* Perf counters opened per thread; 0 compiles the reads out. */
volatile const u32 n_counters = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

/* Processes being traced (tgid), filled by user space: the lasting probes and the
 * scheduler programs look at their threads only. The value counts the graph starts left to the process's open
 * sampling window (then WINDOW_LAST and WINDOW_SPENT); 0 when none is open. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u32);
} traced SEC(".maps");

struct thread {
	struct sched sched;
	u64 out_ts;   /* when it was switched out; 0 while it runs */
	u64 ready_ts; /* when it became runnable while out; 0 if it has not */
	u32 cpu;      /* where it last ran, plus one; 0 before its first switch in */
};

/* Scheduler state of traced threads, by tid. LRU: exited threads age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct thread);
} threads SEC(".maps");

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

/* Records the ring buffer had no room for; user space exports the sum. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} drops SEC(".maps");

/* Records of each traced process the ring buffer had no room for (tgid to count); user
 * space adds and removes the processes. Graph and decode exits carry the count, so that
 * user space drops whole whatever a loss fell into, rather than emit it half built. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

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
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, u32);
	__type(value, struct slot);
} slots SEC(".maps");

/* The split a thread is handing to a backend, by tid modulo SLOTS: at its exit, a split
 * the CPU did not compute itself (a GPU's) has its nodes described if device_traced().
 * Array slots, so that a CPU split costs no hash lookup for it. */
struct split_slot {
	u32 tid;
	u32 cpu; /* the CPU backend computed it: its nodes have probes of their own */
	u64 graph;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, u32);
	__type(value, struct split_slot);
} split_slots SEC(".maps");

/* The calling thread's split slot, if it holds the thread's open split. */
/* The lasting probes (decodes, graphs, splits, copies) are placed once per file, for
 * every process that maps it (user space's probe.Pool): a process's start and exit then
 * place and remove none. Those of a process profinfer does not trace return at once. */
static __always_inline bool untraced(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return !bpf_map_lookup_elem(&traced, &tgid);
}

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

/* Counts a graph start into the calling process's window; true if the window traces it. */
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

/* Whether the calling process's window traces the graph ending now: it counted it and
 * has not been closed. */
static __always_inline bool window_open(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	u32 *left = bpf_map_lookup_elem(&traced, &tgid);
	return left && *left && *left <= WINDOW_LAST;
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

/* A walk of the calling process's thread list, summing their CPU time. */
struct thread_walk {
	struct list_head *pos, *head;
	u64 node_off; /* of thread_node in task_struct */
	struct threads_cpu sum;
};

/* Adds the thread at w->pos and steps to the next; false once the list is done: three
 * reads of kernel memory a thread. */
static __always_inline bool walk_thread(struct thread_walk *w)
{
	if (!w->pos || w->pos == w->head)
		return 0;
	struct task_struct *t = (void *)w->pos - w->node_off;
	w->sum.run_ns += BPF_CORE_READ(t, se.sum_exec_runtime);
	if (bpf_core_field_exists(t->sched_info))
		w->sum.wait_ns += BPF_CORE_READ(t, sched_info.run_delay);
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
 * which is most of the CPU a start spends in the verifier. */
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
	*out = w.sum;
}

/* emit for a graph's entry and exit, with the process's threads' CPU time if cpu (else
 * none summed). */
static __always_inline int emit_graph(u16 kind, u64 a, u64 b, u16 nth, bool cpu, bool loop)
{
	struct graph_record *g = bpf_ringbuf_reserve(&events, sizeof(*g), 0);
	if (!g) {
		dropped();
		return 0;
	}
	fill(&g->ev, kind, a, b, 0, nth, 0);
	if (cpu)
		read_threads_cpu(&g->cpu, loop);
	else
		__builtin_memset(&g->cpu, 0, sizeof(g->cpu));
	bpf_ringbuf_submit(g, submit_flags(&g->ev));
	return 0;
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

/* The batch of the decode a CPU is entering, summed per sequence before it is output. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct batch);
} batches SEC(".maps");

/* What batch_token reads: the batch's arrays in the target, NULL where it has none. */
struct batch_arrays {
	u64 pos, n_seq_id, seq_id, logits;
	u32 last; /* the last token's index: its output is computed when there are no flags */
};

/* Sums token i of the batch into its sequence's entry: four reads of the target's memory
 * per token, paid once per decode. */
static __always_inline long sum_token(u64 i, struct batch_arrays *arr)
{
	u32 zero = 0;
	struct batch *b = bpf_map_lookup_elem(&batches, &zero);
	if (!b)
		return 1;
	s32 seq = 0, pos = -1, n_seq = 1;
	__s8 out = i == arr->last;
	if (arr->seq_id) {
		u64 ids = 0;
		bpf_probe_read_user(&ids, sizeof(ids), (void *)(arr->seq_id + i * 8));
		bpf_probe_read_user(&seq, sizeof(seq), (void *)ids);
		bpf_probe_read_user(&n_seq, sizeof(n_seq), (void *)(arr->n_seq_id + i * 4));
	}
	if (arr->pos)
		bpf_probe_read_user(&pos, sizeof(pos), (void *)(arr->pos + i * 4));
	if (arr->logits)
		bpf_probe_read_user(&out, sizeof(out), (void *)(arr->logits + i));
	if (n_seq > 1)
		b->ev.flags |= BATCH_SHARED;
	u32 n = b->ev.nth;
	for (u32 k = 0; k < MAX_SEQS; k++) {
		struct seq_tokens *st = &b->seqs[k];
		if (k == n) {
			st->seq = seq;
			st->tokens = 0;
			st->pos_min = pos;
			st->pos_max = pos;
			st->outputs = 0;
			b->ev.nth = n + 1;
		} else if (k > n || st->seq != seq) {
			continue;
		}
		st->tokens++;
		if (pos < st->pos_min)
			st->pos_min = pos;
		if (pos > st->pos_max)
			st->pos_max = pos;
		st->outputs += out != 0;
		return 0;
	}
	b->ev.flags |= BATCH_MORE_SEQS;
	return 0;
}

/* bpf_loop's callback. */
static long batch_token(u64 i, void *arg)
{
	return sum_token(i, arg);
}

/* The same without bpf_loop. A global function is verified once, not at each call, so
 * the loop that calls it costs the verifier a few instructions a token. It takes scalars
 * only, as 5.10 requires, and five at most: the last token's index is the batch's count,
 * in the record being built. */
__attribute__((noinline)) int batch_token_global(u64 i, u64 pos, u64 n_seq_id, u64 seq_id, u64 logits)
{
	u32 zero = 0;
	struct batch *b = bpf_map_lookup_elem(&batches, &zero);
	if (!b)
		return 1;
	struct batch_arrays arr = {.pos = pos, .n_seq_id = n_seq_id, .seq_id = seq_id, .logits = logits, .last = b->ev.a - 1};
	return sum_token(i, &arr);
}

/* Where llama_decode's batch is. It is too large for registers: x86-64 passes it in
 * memory above the return address, arm64 a pointer to a copy in x1. */
#if defined(__TARGET_ARCH_arm64)
#define DECODE_BATCH(ctx) ((void *)PT_REGS_PARM2(ctx))
#else
#define DECODE_BATCH(ctx) ((void *)(PT_REGS_SP(ctx) + batch_stack_off))
#endif

/* llama_decode(ctx, batch): the batch is passed in memory, n_tokens first; or
 * llama_context::decode(this, &batch), which llama_decode calls and which a build that
 * inlined llama_decode into its callers (a binding's addon) calls directly, the batch by
 * reference (byref). Its tokens are summed per sequence, for the requests they belong to.
 * The context pointer lets user space read the context's size and threads once. Without
 * bpf_loop (before 5.17), a bounded loop sums the first BOUNDED_BATCH tokens, which the
 * verifier walks one by one. */
static __always_inline int decode_batch(struct pt_regs *ctx, bool loop, bool byref)
{
	u32 zero = 0;
	struct batch *b = bpf_map_lookup_elem(&batches, &zero);
	if (!b)
		return 0;
	void *batch = byref ? (void *)PT_REGS_PARM2(ctx) : DECODE_BATCH(ctx);
	s32 n = 0;
	struct batch_arrays arr = {};
	bpf_probe_read_user(&n, sizeof(n), batch);
	bpf_probe_read_user(&arr.pos, sizeof(arr.pos), batch + batch_pos_off);
	bpf_probe_read_user(&arr.n_seq_id, sizeof(arr.n_seq_id), batch + batch_n_seq_id_off);
	bpf_probe_read_user(&arr.seq_id, sizeof(arr.seq_id), batch + batch_seq_id_off);
	bpf_probe_read_user(&arr.logits, sizeof(arr.logits), batch + batch_logits_off);
	u16 flags = (arr.pos ? 0 : BATCH_NO_POS) | (arr.seq_id ? 0 : BATCH_NO_SEQ) | (arr.logits ? 0 : BATCH_NO_OUTPUTS);
	u32 tokens = n > 0 ? n : 0, limit = loop ? MAX_BATCH : BOUNDED_BATCH;
	arr.last = tokens - 1;
	if (tokens > limit) {
		tokens = limit;
		flags |= BATCH_TRUNCATED;
	}
	fill(&b->ev, EV_DECODE_ENTER, (u64)n, PT_REGS_PARM1(ctx), 0, 0, flags);
	if (loop) {
		bpf_loop(tokens, batch_token, &arr, 0);
	} else {
		for (u32 i = 0; i < BOUNDED_BATCH && i < tokens; i++)
			if (batch_token_global(i, arr.pos, arr.n_seq_id, arr.seq_id, arr.logits))
				break;
	}
	u32 seqs = b->ev.nth;
	if (seqs > MAX_SEQS)
		seqs = MAX_SEQS;
	if (bpf_ringbuf_output(&events, b, sizeof(struct event) + seqs * sizeof(struct seq_tokens), wakeup()))
		dropped();
	return 0;
}

SEC("uprobe/llama_decode")
int decode_enter(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return decode_batch(ctx, 1, 0);
}

SEC("uprobe/llama_decode")
int decode_enter_bounded(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return decode_batch(ctx, 0, 0);
}

SEC("uprobe/llama_context_decode")
int decode_method_enter(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return decode_batch(ctx, 1, 1);
}

SEC("uprobe/llama_context_decode")
int decode_method_enter_bounded(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return decode_batch(ctx, 0, 1);
}

/* llama_memory_seq_rm(mem, seq, p0, p1), or llama_kv_self_seq_rm or llama_kv_cache_seq_rm
 * (ctx, seq, p0, p1) in older releases: positions [p0, p1) of sequence seq (every one
 * if seq < 0) leave the cache; p1 < 0 rewinds the sequence to p0, as a server does when a
 * new prompt comes to a slot. a is seq, b is p0 in its low half and p1 in its high. */
SEC("uprobe/llama_memory_seq_rm")
int seq_rm(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_SEQ_RM, (u64)(s32)PT_REGS_PARM2(ctx), (u64)(u32)PT_REGS_PARM3(ctx) | (u64)(u32)PT_REGS_PARM4(ctx) << 32, 0, 0, 0);
}

/* llama_memory_clear(mem, data), or llama_kv_self_clear or llama_kv_cache_clear(ctx):
 * every sequence leaves the cache, as seq_rm(-1, -1, -1). */
SEC("uprobe/llama_memory_clear")
int seq_clear(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_SEQ_RM, (u64)-1, (u64)-1, 0, 0, 0);
}

SEC("uretprobe/llama_decode")
int decode_exit(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_DECODE_EXIT, (u64)(s32)PT_REGS_RC(ctx), lost_so_far(), 0, 0, 0);
}

/* Decides, as the calling thread (thread 0) starts computing graph, whether its node
 * starts may skip the detail: the graph was computed before under the current stamp, so
 * its nodes were described then. Otherwise they will be now. */
static __always_inline void remember_graph(void *graph)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 zero = 0, tid = (u32)id, tgid = id >> 32, at = tid & (SLOTS - 1);
	struct slot *sl = bpf_map_lookup_elem(&slots, &at);
	u64 *stamp = bpf_map_lookup_elem(&built, &zero);
	if (!sl || !stamp)
		return;
	sl->tid = tid;
	sl->known = 0;
	sl->graph = 0;
	if (!bpf_map_lookup_elem(&remember, &tgid))
		return;
	struct graph_key key = {.tgid = tgid, .graph = (u64)graph};
	u64 *seen = bpf_map_lookup_elem(&described, &key);
	if (seen && *seen == *stamp) {
		sl->known = 1;
		return;
	}
	sl->graph = (u64)graph;
	u64 now = *stamp;
	bpf_map_update_elem(&described, &key, &now, BPF_ANY);
}

/* ggml_graph_compute(cgraph, cplan): the CPU backend's graph, on the calling thread. A
 * variant of each probe walks the threads with bpf_loop, the other without (before 5.17). */
static __always_inline int graph_start(struct pt_regs *ctx, bool loop)
{
	void *graph = (void *)PT_REGS_PARM1(ctx);
	void *plan = (void *)PT_REGS_PARM2(ctx);
	s32 nodes = 0, threads = 0;
	bpf_probe_read_user(&nodes, sizeof(nodes), graph + graph_nnodes_off);
	bpf_probe_read_user(&threads, sizeof(threads), plan + cplan_nthreads_off);
	remember_graph(graph);
	struct split_slot *split = open_split(bpf_get_current_pid_tgid());
	if (split)
		split->cpu = 1;
	bool traced = window_graph();
	return emit_graph(EV_GRAPH_ENTER, (u64)graph, (u64)nodes, (u16)threads, traced || all_traced, loop);
}

static __always_inline int graph_end(struct pt_regs *ctx, bool loop)
{
	return emit_graph(EV_GRAPH_EXIT, (u64)(s32)PT_REGS_RC(ctx), lost_so_far(), 0, all_traced || window_open(), loop);
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

/* The application layer of the runtimes whose unit of work is not llama_decode: each of
 * their scheduler's computations is a step (whisper.cpp's encoder and decoder passes, the
 * forward batches of Ollama's own engine, any other GGML program's graphs), and whisper's
 * transcription is the job the steps belong to. Placed only on such processes: in
 * llama.cpp the step is the decode's, and its probes would cost every token two traps. */

/* ggml_backend_sched_graph_compute_async(sched, graph): a step begins (EV_STEP_ENTER). a is
 * the graph, b the scheduler, ith its backends, nth the graph's nodes (at most 0xffff);
 * the graph's first node is described: a runtime tells its graphs apart by the node they
 * begin with (whisper's decoder by the GET_ROWS of its tokens' embeddings), and a batch's
 * tokens by the rows that node gets. */
SEC("uprobe/ggml_backend_sched_graph_compute_async")
int step_enter(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	void *sched = (void *)PT_REGS_PARM1(ctx);
	void *graph = (void *)PT_REGS_PARM2(ctx);
	struct detail *d = bpf_ringbuf_reserve(&events, sizeof(*d), 0);
	if (!d) {
		dropped();
		return 0;
	}
	s32 n = 0, backends = 0;
	void **nodes = 0;
	void *first = 0;
	bpf_probe_read_user(&n, sizeof(n), graph + graph_nnodes_off);
	bpf_probe_read_user(&nodes, sizeof(nodes), graph + graph_nodes_off);
	bpf_probe_read_user(&backends, sizeof(backends), sched + sched_n_backends_off);
	if (n > 0 && nodes)
		bpf_probe_read_user(&first, sizeof(first), nodes);
	fill(&d->ev, EV_STEP_ENTER, (u64)graph, (u64)sched, (u16)backends, n > 0xffff ? 0xffff : (u16)(n > 0 ? n : 0), 0);
	__builtin_memset(&d->counters, 0, sizeof(d->counters));
	if (first) {
		void *ids = 0;
		s64 rows = 0;
		describe(d, first, &ids, &rows);
	} else {
		__builtin_memset(d->tensor, 0, sizeof(d->tensor));
		__builtin_memset(d->src, 0, sizeof(d->src));
		__builtin_memset(d->src_view, 0, sizeof(d->src_view));
	}
	bpf_ringbuf_submit(d, wakeup());
	return 0;
}

SEC("uretprobe/ggml_backend_sched_graph_compute_async")
int step_exit(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_STEP_EXIT, (u64)(s32)PT_REGS_RC(ctx), lost_so_far(), 0, 0, 0);
}

/* whisper_full_with_state(ctx, state, params, samples, n_samples): a transcription of
 * n_samples of 16 kHz audio, a; b is the whisper_context, whose hyperparameters user space
 * reads once. The parameters, a struct too large for registers, are passed in memory on
 * x86-64, and by a pointer in x2 on arm64. */
#if defined(__TARGET_ARCH_arm64)
#define JOB_SAMPLES(ctx) PT_REGS_PARM5(ctx)
#else
#define JOB_SAMPLES(ctx) PT_REGS_PARM4(ctx)
#endif

SEC("uprobe/whisper_full_with_state")
int job_enter(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_JOB_ENTER, (u64)(s32)JOB_SAMPLES(ctx), PT_REGS_PARM1(ctx), 0, 0, 0);
}

SEC("uretprobe/whisper_full_with_state")
int job_exit(struct pt_regs *ctx)
{
	if (untraced())
		return 0;
	return emit(EV_JOB_EXIT, (u64)(s32)PT_REGS_RC(ctx), lost_so_far(), 0, 0, 0);
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

/* ggml_graph_compute_thread returns on every thread once the graph is done with it: the
 * counters read here close the thread's last node, and what follows until its next node
 * is outside nodes. Attached only with counters. */
SEC("uretprobe/ggml_graph_compute_thread")
int thread_exit(struct pt_regs *ctx)
{
	return emit_counted(EV_THREAD_EXIT, 0, 0, 0, 0, 0);
}

/* The scheduler layer: tp_btf programs, so no tracefs is needed. They return at once for
 * tasks outside the traced processes. */

static __always_inline struct thread *thread_of(struct task_struct *task)
{
	u32 tgid = task->tgid, tid = task->pid;
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (t)
		return t;
	struct thread zero = {};
	bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&threads, &tid);
}

/* A thread switches out, and another in. A user thread preempted on its way back to user
 * space leaves through schedule() with preempt false: still runnable (prev_state 0,
 * TASK_RUNNING) is what marks it preempted. */
static __always_inline int switched(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	u64 now = bpf_ktime_get_ns();
	struct thread *t = thread_of(prev);
	if (t) {
		t->out_ts = now;
		t->ready_ts = 0;
		if (preempt || prev_state == 0) {
			t->ready_ts = now;
			t->sched.preemptions++;
		}
	}
	t = thread_of(next);
	if (t) {
		u32 cpu = bpf_get_smp_processor_id() + 1;
		if (t->out_ts) {
			t->sched.off_ns += now - t->out_ts;
			if (t->ready_ts)
				t->sched.runq_ns += now - t->ready_ts;
		}
		if (t->cpu && t->cpu != cpu)
			t->sched.migrations++;
		t->cpu = cpu;
		t->out_ts = 0;
		t->ready_ts = 0;
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	return switched(preempt, prev, next, prev_state);
}

/* Before 5.18 the tracepoint has no prev_state argument. The tracepoint itself read it
 * from the task as it switched out, as this does: task_struct.state, __state from 5.14. */
struct task_struct___state {
	long state;
} __attribute__((preserve_access_index));

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch_task, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	unsigned int state;
	if (bpf_core_field_exists(prev->__state))
		state = prev->__state;
	else
		state = ((struct task_struct___state *)prev)->state;
	return switched(preempt, prev, next, state);
}

/* A traced process starts a thread: its perf counters are opened before it computes,
 * instead of when the reader first meets its records, which it reads on a timer. A wakeup
 * per thread started, attached only with counters configured. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(thread_start, struct task_struct *parent, struct task_struct *child)
{
	u32 tgid = child->tgid;
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		dropped();
		return 0;
	}
	fill(e, EV_THREAD_START, 0, 0, 0, 0, 0);
	e->tid = child->pid;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *task)
{
	struct thread *t = thread_of(task);
	if (t && t->out_ts && !t->ready_ts)
		t->ready_ts = bpf_ktime_get_ns();
	return 0;
}
