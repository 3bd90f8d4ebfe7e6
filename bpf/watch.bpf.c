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

/* The fields an exit is told by, in their own flavours so that the profiler's object,
 * which shares regs.h, is not touched. */
struct mm_struct;
struct signal_struct___exit {
	struct mm_struct *oom_mm; /* set by mark_oom_victim, kept until the struct is freed */
} __attribute__((preserve_access_index));
struct task_struct___exit {
	int exit_code; /* wait(2)'s status: the exit status << 8, or the killing signal */
	struct signal_struct___exit *signal;
} __attribute__((preserve_access_index));

/* Read in user space as native-endian integers; the last three are an exit's. */
struct notice {
	u32 pid;
	u32 kind;
	u64 ts;        /* bpf_ktime_get_ns, the clock of the profiler's records */
	u32 exit_code; /* wait(2)'s status */
	u32 oom;       /* the kernel's OOM killer chose the process */
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

static __always_inline int notify_exit(u32 kind, struct task_struct___exit *p)
{
	struct notice *n = bpf_ringbuf_reserve(&notices, sizeof(*n), 0);
	if (!n)
		return 0; /* the periodic scan still finds it */
	n->pid = bpf_get_current_pid_tgid() >> 32;
	n->kind = kind;
	n->ts = bpf_ktime_get_ns();
	n->exit_code = p ? p->exit_code : 0;
	n->oom = p && p->signal->oom_mm;
	bpf_ringbuf_submit(n, 0);
	return 0;
}

static __always_inline int notify(u32 kind)
{
	return notify_exit(kind, 0);
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

/* Only the thread group leader's exit ends the process as discovery knows it. Its
 * exit_code is set by now (do_exit), and a group exit gives every thread the group's. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit, struct task_struct *p)
{
	u64 id = bpf_get_current_pid_tgid();
	if ((u32)id != id >> 32 || !is_traced())
		return 0;
	return notify_exit(NOTICE_EXITED, (void *)p);
}
