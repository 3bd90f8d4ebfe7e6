/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The scheduler layer, and the names threads take: tp_btf programs, so no tracefs is
 * needed. They return at once for tasks outside the traced processes; for the others the
 * scheduler's keep a struct thread, whose sched fill copies into every record. */
#pragma once

#include "maps.bpf.h"
#include "helpers.bpf.h"
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

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

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *task)
{
	struct thread *t = thread_of(task);
	if (t && t->out_ts && !t->ready_ts)
		t->ready_ts = bpf_ktime_get_ns();
	return 0;
}

/* A traced process's thread takes a name (prctl, pthread_setname_np, exec). A software
 * device runs in threads of the process's own that it names, lavapipe's llvmpipe-N: read
 * here, a short job's are known though it exits before its records are read. A few
 * records a process, attached with the runtime layer; a and b hold the name. */
SEC("tp_btf/task_rename")
int BPF_PROG(thread_name, struct task_struct *task, const char *comm)
{
	struct event *e = task_record(task, EV_THREAD_NAME);
	if (!e)
		return 0;
	bpf_probe_read_kernel_str(&e->a, sizeof(e->a) + sizeof(e->b), comm);
	bpf_ringbuf_submit(e, wakeup());
	return 0;
}
