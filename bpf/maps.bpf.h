/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What the layers share with user space and with each other: the constants the loader
 * sets, the ring buffer, and the maps that more than one layer uses. A map that one layer
 * alone uses is defined with that layer. */
#pragma once

#include "events.bpf.h"
#include <bpf/bpf_helpers.h>

#define SLOTS 1024 /* threads computing a graph at once; a power of two */

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
volatile const u32 batch_token_off = 8;     /* llama_batch.token */
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
 * scheduler programs look at their threads only. The value counts the graph starts left
 * to the process's open sampling window (then WINDOW_LAST and WINDOW_SPENT); 0 when none
 * is open. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u32);
} traced SEC(".maps");

/* A traced thread as the scheduler programs follow it; fill copies its sched. */
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
