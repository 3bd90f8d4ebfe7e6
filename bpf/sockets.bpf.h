/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The connections layer: when each request reached a traced server, and when the server
 * first answered it, from the socket syscalls of its HTTP threads. A request is the first
 * bytes a connection receives after the server last sent on it (or after it was
 * accepted); its answer is the first send after that, or the connection's close. User
 * space matches each to the request whose first decode falls between: the time before
 * that decode is the request's wait for a slot. Two records a request, none a token.
 *
 * The raw syscall tracepoints fire for every syscall of every process: the programs
 * compare the syscall's number before anything else. cpp-httplib (llama-server) receives
 * and sends with recv and send; Go's net/http (Ollama's runners) with read and write,
 * which are counted only on a connection the process accepted or received on, never on
 * a file. */
#pragma once

#include "maps.bpf.h"
#include "helpers.bpf.h"
#include <bpf/bpf_tracing.h>

#if defined(__TARGET_ARCH_arm64)
#define NR_READ 63
#define NR_WRITE 64
#define NR_CLOSE 57
#define NR_ACCEPT 202
#define NR_SENDTO 206
#define NR_RECVFROM 207
#define NR_ACCEPT4 242
/* arm64's pt_regs past the user registers: the syscall's first argument (x0 holds its
 * return value at the exit) and its number. */
struct pt_regs___syscall {
	u64 orig_x0;
	s32 syscallno;
} __attribute__((preserve_access_index));
#define SYSCALL_ARG0(regs) (((struct pt_regs___syscall *)(regs))->orig_x0)
#define SYSCALL_NR(regs) (((struct pt_regs___syscall *)(regs))->syscallno)
#else
#define NR_READ 0
#define NR_WRITE 1
#define NR_CLOSE 3
#define NR_ACCEPT 43
#define NR_SENDTO 44
#define NR_RECVFROM 45
#define NR_ACCEPT4 288
#define SYSCALL_ARG0(regs) ((regs)->di)
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#endif

/* Where a connection is: it received a request not yet answered, or not. */
#define CONN_IDLE 0
#define CONN_RECEIVED 1

struct conn_key {
	u32 tgid;
	u32 fd;
};

/* The processes whose connections are followed, to the traced process their requests
 * are computed by: each traced process is its own; a front is a process that takes the
 * requests and hands them to a traced one (ollama serve, to its runner), whose records go
 * to that one's, flagged CONN_FRONT. Filled by user space. */
struct conn_owner {
	u32 tgid;
	u32 front;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, struct conn_owner);
} conn_owners SEC(".maps");

/* The followed processes' connections. LRU: a process's closes are seen, but not its exit. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct conn_key);
	__type(value, u32);
} conns SEC(".maps");

/* A record of kind for connection fd of the calling process, sent as its owner's. */
static __always_inline void conn_record(u16 kind, u32 fd, struct conn_owner *o, u16 flags)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		dropped();
		return;
	}
	fill(e, kind, fd, 0, 0, 0, flags | (o->front ? CONN_FRONT : 0));
	e->pid = o->tgid;
	bpf_ringbuf_submit(e, wakeup());
}

/* A send on fd, or its close: the request it received is answered. */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	if (id != NR_WRITE && id != NR_SENDTO && id != NR_CLOSE)
		return 0;
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct conn_owner *o = bpf_map_lookup_elem(&conn_owners, &tgid);
	if (!o)
		return 0;
	struct conn_key k = {.tgid = tgid, .fd = (u32)SYSCALL_ARG0(regs)};
	u32 *state = bpf_map_lookup_elem(&conns, &k);
	if (!state)
		return 0;
	bool received = *state == CONN_RECEIVED;
	if (id == NR_CLOSE)
		bpf_map_delete_elem(&conns, &k);
	else
		*state = CONN_IDLE;
	if (received)
		conn_record(EV_REPLIED, k.fd, o, id == NR_CLOSE ? CONN_CLOSED : 0);
	return 0;
}

/* A connection accepted, or bytes received on one. */
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	long id = SYSCALL_NR(regs);
	if (id != NR_READ && id != NR_RECVFROM && id != NR_ACCEPT && id != NR_ACCEPT4)
		return 0;
	if (ret < 0)
		return 0;
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct conn_owner *o = bpf_map_lookup_elem(&conn_owners, &tgid);
	if (!o)
		return 0;
	struct conn_key k = {.tgid = tgid};
	u32 received = CONN_RECEIVED;
	if (id == NR_ACCEPT || id == NR_ACCEPT4) {
		u32 idle = CONN_IDLE;
		k.fd = (u32)ret;
		bpf_map_update_elem(&conns, &k, &idle, BPF_ANY);
		return 0;
	}
	if (ret == 0) /* the peer's end of the stream */
		return 0;
	k.fd = (u32)SYSCALL_ARG0(regs);
	u32 *state = bpf_map_lookup_elem(&conns, &k);
	if (state) {
		if (*state == CONN_RECEIVED)
			return 0;
		*state = CONN_RECEIVED;
	} else {
		/* recvfrom is a socket's alone: a connection made before profinfer came. */
		if (id == NR_READ)
			return 0;
		bpf_map_update_elem(&conns, &k, &received, BPF_ANY);
	}
	conn_record(EV_RECEIVED, k.fd, o, 0);
	return 0;
}
