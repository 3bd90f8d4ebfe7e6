/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The connections layer: when each request reached a traced server, and when the server
 * first answered it, from the socket calls of its HTTP threads. A request is the first
 * bytes a connection receives after the server last sent on it (or after it was
 * accepted); its answer is the first send after that, or the connection's close. User
 * space matches each to the request whose first decode falls between: the time before
 * that decode is the request's wait for a slot. Two records a request, none a token.
 *
 * Two sets of programs, one attached while a process is traced (user space's
 * AttachConnections): the socket layer's tracepoints, or before Linux 6.5 the raw syscall
 * tracepoints. */
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

/* The followed processes' connections by fd, for the syscalls' set. LRU: a process's
 * closes are seen, but not its exit. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct conn_key);
	__type(value, u32);
} conns SEC(".maps");

/* A record of kind for connection conn (an fd of the calling process, or a struct sock),
 * sent as its owner's. */
static __always_inline void conn_record(u16 kind, u64 conn, struct conn_owner *o, u16 flags)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		dropped();
		return;
	}
	fill(e, kind, conn, 0, 0, 0, flags | (o->front ? CONN_FRONT : 0));
	e->pid = o->tgid;
	bpf_ringbuf_submit(e, wakeup());
}

/* Where the kernel has the socket layer's tracepoints (Linux 6.5): sock_recv_length
 * and sock_send_length fire for socket receives and sends alone, in the caller's thread,
 * whatever syscall made them (recv, read, recvmsg), and no other syscall pays anything. A
 * connection is its struct sock; it is the server's where its local port is one the
 * process listens on (its listen seen here, or read from /proc by user space), and it
 * is forgotten as TCP closes it. */
#define TCP_LISTEN 10
#define TCP_CLOSE 7
#define MSG_PEEK 2

struct port_key {
	u32 tgid;
	u32 port;
};

/* The ports the followed processes listen on. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct port_key);
	__type(value, u8);
} listening SEC(".maps");

/* A followed server's connection: whose records its are, and where it is. */
struct sock_conn {
	struct conn_owner owner;
	u32 state;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct sock_conn);
} sock_conns SEC(".maps");

SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv, struct sock *sk, int ret, int flags)
{
	if (ret <= 0 || (flags & MSG_PEEK))
		return 0;
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct conn_owner *o = bpf_map_lookup_elem(&conn_owners, &tgid);
	if (!o)
		return 0;
	u64 key = (u64)sk;
	struct sock_conn *c = bpf_map_lookup_elem(&sock_conns, &key);
	if (c) {
		if (c->state == CONN_RECEIVED)
			return 0;
		c->state = CONN_RECEIVED;
		c->owner = *o; /* a front's kept-alive connection, its runner since replaced */
	} else {
		struct port_key pk = {.tgid = tgid, .port = BPF_CORE_READ(sk, __sk_common.skc_num)};
		if (!bpf_map_lookup_elem(&listening, &pk))
			return 0; /* a connection it made, not a client's */
		struct sock_conn fresh = {.owner = *o, .state = CONN_RECEIVED};
		bpf_map_update_elem(&sock_conns, &key, &fresh, BPF_ANY);
	}
	conn_record(EV_RECEIVED, key, o, 0);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send, struct sock *sk, int ret, int flags)
{
	u64 key = (u64)sk;
	struct sock_conn *c = bpf_map_lookup_elem(&sock_conns, &key);
	if (!c || c->state != CONN_RECEIVED)
		return 0;
	c->state = CONN_IDLE;
	conn_record(EV_REPLIED, key, &c->owner, 0);
	return 0;
}

/* A followed process listens on a port; a followed connection closes (in whatever
 * context TCP closes it: its owner is kept with it). */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(sock_state, struct sock *sk, int oldstate, int newstate)
{
	if (newstate == TCP_LISTEN) {
		u32 tgid = bpf_get_current_pid_tgid() >> 32;
		if (!bpf_map_lookup_elem(&conn_owners, &tgid))
			return 0;
		struct port_key pk = {.tgid = tgid, .port = BPF_CORE_READ(sk, __sk_common.skc_num)};
		u8 one = 1;
		bpf_map_update_elem(&listening, &pk, &one, BPF_ANY);
		return 0;
	}
	if (newstate != TCP_CLOSE)
		return 0;
	u64 key = (u64)sk;
	struct sock_conn *c = bpf_map_lookup_elem(&sock_conns, &key);
	if (!c)
		return 0;
	if (c->state == CONN_RECEIVED) {
		struct conn_owner o = c->owner;
		conn_record(EV_REPLIED, key, &o, CONN_CLOSED);
	}
	bpf_map_delete_elem(&sock_conns, &key);
	return 0;
}

/* Before Linux 6.5: the raw syscall tracepoints, which take every syscall of the machine
 * through the kernel's slower path while attached (some 130 ns a syscall here); the
 * programs leave all but seven at the comparison of the syscall's number. cpp-httplib
 * (llama-server) receives and sends with recv and send; Go's net/http (ollama serve,
 * Ollama's old runners) with read and write, which are counted only on a connection the
 * process accepted or received on, never on a file. */
/* A send on fd, or its close (syscall nr): the request it received is answered. */
static __always_inline int sent(long nr, u32 fd)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct conn_owner *o = bpf_map_lookup_elem(&conn_owners, &tgid);
	if (!o)
		return 0;
	struct conn_key k = {.tgid = tgid, .fd = fd};
	u32 *state = bpf_map_lookup_elem(&conns, &k);
	if (!state)
		return 0;
	bool received = *state == CONN_RECEIVED;
	if (nr == NR_CLOSE)
		bpf_map_delete_elem(&conns, &k);
	else
		*state = CONN_IDLE;
	if (received)
		conn_record(EV_REPLIED, k.fd, o, nr == NR_CLOSE ? CONN_CLOSED : 0);
	return 0;
}

/* A connection accepted (fd ret), or ret bytes received on fd (syscall nr). */
static __always_inline int received(long nr, u32 fd, long ret)
{
	if (ret < 0)
		return 0;
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct conn_owner *o = bpf_map_lookup_elem(&conn_owners, &tgid);
	if (!o)
		return 0;
	struct conn_key k = {.tgid = tgid};
	u32 state_received = CONN_RECEIVED;
	if (nr == NR_ACCEPT || nr == NR_ACCEPT4) {
		u32 idle = CONN_IDLE;
		k.fd = (u32)ret;
		bpf_map_update_elem(&conns, &k, &idle, BPF_ANY);
		return 0;
	}
	if (ret == 0) /* the peer's end of the stream */
		return 0;
	k.fd = fd;
	u32 *state = bpf_map_lookup_elem(&conns, &k);
	if (state) {
		if (*state == CONN_RECEIVED)
			return 0;
		*state = CONN_RECEIVED;
	} else {
		/* recvfrom is a socket's alone: a connection made before profinfer came. */
		if (nr == NR_READ)
			return 0;
		bpf_map_update_elem(&conns, &k, &state_received, BPF_ANY);
	}
	conn_record(EV_RECEIVED, k.fd, o, 0);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	if (id != NR_WRITE && id != NR_SENDTO && id != NR_CLOSE)
		return 0;
	return sent(id, (u32)SYSCALL_ARG0(regs));
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	long id = SYSCALL_NR(regs);
	if (id != NR_READ && id != NR_RECVFROM && id != NR_ACCEPT && id != NR_ACCEPT4)
		return 0;
	return received(id, (u32)SYSCALL_ARG0(regs), ret);
}
