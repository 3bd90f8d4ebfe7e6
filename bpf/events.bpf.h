/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The records the programs send through the ring buffer: their kinds, flags and layouts,
 * which user space reads as the Go types bpf2go generates from them (gen.go's -type). */
#pragma once

#include "regs.h"

#define TENSOR_MAX 384  /* bytes of struct ggml_tensor copied; larger layouts are refused */
#define SRC_HEAD 48     /* type and ne[] of a source tensor */
#define N_SRC 3
#define IDS_SMALL 512   /* bytes of a MoE router's expert ids copied per node: decode */
#define IDS_MAX 16384   /* and prefill */
#define LABEL_MAX 256   /* bytes of an op's label sent, its NUL among them */
#define TIMES_CHUNK 32  /* times in one device_times record */
#define MAX_SEQS 16     /* sequences of a batch summed */
#define PREFIX_TOKENS 64 /* a prompt's first tokens, hashed: a prompt start computed again */
#define CTX_HEAD 64     /* bytes of a decode's llama_context sent with it */
#define MAX_COUNTERS 8  /* perf counters per thread */

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
	EV_THREAD_NAME = 26,
	EV_RECEIVED = 27, /* a connection's request arrived: a is its fd */
	EV_REPLIED = 28,  /* the server answered it, or closed the connection (CONN_CLOSED) */
};

/* Flags on events. */
#define NODE_FUSED 1 /* started by a fused kernel; tensor2 is the second node */
#define COUNTED 2    /* the record carries the thread's perf counter values */
#define NODE_KNOWN 4 /* thread 0's start of a node whose detail was sent since the last graph build */
#define COPY_QUEUED 1 /* a copy a device queues with its work, rather than makes before returning */
#define CONN_CLOSED 1 /* a request's connection closed before the server sent on it */
#define CONN_FRONT 4  /* of the front that handed the request to the process (ollama serve); not 2, every kind's COUNTED */
/* On a decode's entry: what its batch leaves out, and whether its sequences overflowed. */
#define BATCH_NO_POS 8       /* no positions: llama_decode places the tokens itself */
#define BATCH_NO_SEQ 16      /* no sequence ids: every token is sequence 0's */
#define BATCH_NO_OUTPUTS 32  /* no output flags: the last token's logits alone are computed */
#define BATCH_MORE_SEQS 64   /* tokens of more than MAX_SEQS sequences; those past it are not summed */
#define BATCH_SHARED 128     /* a token belongs to several sequences; it is summed into its first */
#define BATCH_TRUNCATED 256  /* more than MAX_BATCH tokens; those past it are not summed */

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
	/* Its tokens at positions under PREFIX_TOKENS, those of a prompt's start computed
	 * (not read from the cache): their count, and their hashes summed, so that a prompt
	 * start split over decodes adds up. */
	s32 prefix_tokens;
	u32 prefix;
};

/* A decode's entry with its batch summed per sequence: a is the batch's token count, b
 * the llama_context, nth the sequences in seqs, flags BATCH_*. ctx_head is the start of
 * the llama_context, where its n_ctx, n_batch and n_ubatch lie in every release that has
 * getters for them (offsets 8 to 44): read with the decode, they are its own context's,
 * even one made and freed before user space could read it (llama-bench's per test). */
struct batch {
	struct event ev;
	u8 ctx_head[CTX_HEAD];
	struct seq_tokens seqs[MAX_SEQS];
};

/* The CPU time of the calling process's threads so far, summed at a graph's entry and at
 * its exit: the difference says how much of the graph's wall time its threads had a CPU,
 * at a cost per graph rather than per switch. The kernel brings a running thread's
 * runtime up to date at scheduler ticks and switches, so a reading is exact to about a
 * tick per thread; over many graphs the errors cancel. */
struct threads_cpu {
	u64 run_ns;  /* se.sum_exec_runtime: time on a CPU, the exited threads' included */
	u64 wait_ns; /* sched_info.run_delay: runnable, waiting for a CPU; 0 without CONFIG_SCHED_INFO */
	u64 maj_flt; /* major page faults: each one a wait for the disk */
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
