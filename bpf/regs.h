/* Kernel types beyond the UAPI headers: only the registers a uprobe sees, for x86-64 and
 * arm64, and the task_struct fields read, with CO-RE relocations, so no generated
 * vmlinux.h is needed to build. */
#pragma once

#include <linux/types.h>
#include <linux/bpf.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;

#if defined(__TARGET_ARCH_arm64)
/* The UAPI register set that arm64's struct pt_regs begins with, which bpf_tracing.h
 * reads the arguments from: stable, so no relocation. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
struct pt_regs {
	struct user_pt_regs user_regs;
};
#else
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));
#endif

struct list_head {
	struct list_head *next, *prev;
};

struct sched_entity {
	u64 sum_exec_runtime;
} __attribute__((preserve_access_index));

struct sched_info {
	unsigned long long run_delay; /* CONFIG_SCHED_INFO */
} __attribute__((preserve_access_index));

/* The list of a process's threads. */
struct signal_struct {
	struct list_head thread_head;
	unsigned long long sum_sched_runtime; /* of the threads that exited */
	unsigned long maj_flt;                /* likewise */
} __attribute__((preserve_access_index));

/* The task fields the programs read, relocated against the kernel's BTF. */
struct task_struct {
	int pid;
	int tgid;
	unsigned int __state; /* 5.14 on; state before */
	struct signal_struct *signal;
	struct list_head thread_node; /* in signal->thread_head */
	struct sched_entity se;
	struct sched_info sched_info;
	unsigned long maj_flt; /* major page faults */
} __attribute__((preserve_access_index));

/* A socket, as the socket tracepoints give it: its local port. */
struct sock_common {
	unsigned short skc_num;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

/* bpf_tracing.h reads pt_regs by kernel field names when this is defined. */
#define __VMLINUX_H__
