/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The application layer: llama.cpp's decodes, their batches summed per sequence, and the
 * cache removals that bound its requests; other runtimes' steps, and whisper.cpp's
 * transcriptions. */
#pragma once

#include "helpers.bpf.h"
#include <bpf/bpf_tracing.h>

#define MAX_BATCH 65536    /* tokens summed with bpf_loop */
#define BOUNDED_BATCH 2048 /* tokens summed where the kernel has no bpf_loop (before 5.17) */

/* The batch of the decode a CPU is entering, summed per sequence before it is output. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct batch);
} batches SEC(".maps");

/* What batch_token reads: the batch's arrays in the target, NULL where it has none. */
struct batch_arrays {
	u64 token, pos, n_seq_id, seq_id, logits;
	u32 last; /* the last token's index: its output is computed when there are no flags */
};

/* The arrays of the batch a CPU is summing, for batch_token_global, which takes scalars
 * alone. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct batch_arrays);
} batch_arrays SEC(".maps");

/* A token's hash at its position, for the sum over a prompt's start: murmur3's finaliser
 * over both, so that equal sums mean equal starts but for a 2^-32 chance. */
static __always_inline u32 token_hash(u32 token, u32 pos)
{
	u32 h = token * 0x9e3779b1u ^ pos * 0x85ebca77u;
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	return h ^ (h >> 16);
}

/* Sums token i of the batch into its sequence's entry: four reads of the target's memory
 * per token, paid once per decode, and a fifth for a token of a prompt's start. */
static __always_inline long sum_token(u64 i, struct batch_arrays *arr)
{
	u32 zero = 0;
	struct batch *b = bpf_map_lookup_elem(&batches, &zero);
	if (!b)
		return 1;
	s32 seq = 0, pos = -1, n_seq = 1, token = 0;
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
			st->prefix_tokens = 0;
			st->prefix = 0;
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
		if (pos >= 0 && pos < PREFIX_TOKENS && arr->token &&
		    !bpf_probe_read_user(&token, sizeof(token), (void *)(arr->token + i * 4))) {
			st->prefix_tokens++;
			st->prefix += token_hash(token, pos);
		}
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
 * only, as 5.10 requires: the arrays are in batch_arrays. */
__attribute__((noinline)) int batch_token_global(u64 i)
{
	u32 zero = 0;
	struct batch_arrays *arr = bpf_map_lookup_elem(&batch_arrays, &zero);
	if (!arr)
		return 1;
	return sum_token(i, arr);
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
 * The context's first bytes go with it, its settings among them. Without
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
	bpf_probe_read_user(&arr.token, sizeof(arr.token), batch + batch_token_off);
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
	bpf_probe_read_user(b->ctx_head, sizeof(b->ctx_head), (void *)PT_REGS_PARM1(ctx)); /* zeroed if unreadable */
	if (loop) {
		bpf_loop(tokens, batch_token, &arr, 0);
	} else if (!bpf_map_update_elem(&batch_arrays, &zero, &arr, BPF_ANY)) {
		for (u32 i = 0; i < BOUNDED_BATCH && i < tokens; i++)
			if (batch_token_global(i))
				break;
	}
	u32 seqs = b->ev.nth;
	if (seqs > MAX_SEQS)
		seqs = MAX_SEQS;
	if (bpf_ringbuf_output(&events, b, offsetof(struct batch, seqs) + seqs * sizeof(struct seq_tokens), wakeup()))
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
