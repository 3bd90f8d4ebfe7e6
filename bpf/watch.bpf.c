//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Notices for discovery, so that it need not scan /proc on a timer: each scan wakes the
 * collector on the cores the model runs on. A process that execs, or whose dynamic loader
 * finishes loading objects (at start, and at each dlopen, as when a binding loads its
 * backend), may have become a GGML process; a traced process that exits or execs must be
 * detached. Notices are rare, so each may wake the reader. */
#include "regs.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

enum notice_kind {
	NOTICE_MAPPED = 1, /* new code: look at the process once its loader settles */
	NOTICE_EXITED = 2, /* a traced process exited */
	NOTICE_EXECED = 3, /* a traced process replaced its image */
};

/* Read in user space as two native-endian u32s. */
struct notice {
	u32 pid;
	u32 kind;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 10);
} notices SEC(".maps");

/* The profiler's map of traced processes (tgid), shared at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u32);
} traced SEC(".maps");

static __always_inline int notify(u32 kind)
{
	struct notice *n = bpf_ringbuf_reserve(&notices, sizeof(*n), 0);
	if (!n)
		return 0; /* the periodic scan still finds it */
	n->pid = bpf_get_current_pid_tgid() >> 32;
	n->kind = kind;
	bpf_ringbuf_submit(n, 0);
	return 0;
}

static __always_inline bool is_traced(void)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&traced, &tgid);
}

/* The dynamic loader's debugger hook, _dl_debug_state: called once the objects a
 * program starts with are loaded, and around each dlopen and dlclose. */
SEC("uprobe/_dl_debug_state")
int loader_state(struct pt_regs *ctx)
{
	return notify(NOTICE_MAPPED);
}

/* A static executable is whole at exec; a dynamic one has its loader's notice follow. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(process_exec)
{
	return notify(is_traced() ? NOTICE_EXECED : NOTICE_MAPPED);
}

/* Only the thread group leader's exit ends the process as discovery knows it. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit)
{
	u64 id = bpf_get_current_pid_tgid();
	if ((u32)id != id >> 32 || !is_traced())
		return 0;
	return notify(NOTICE_EXITED);
}
