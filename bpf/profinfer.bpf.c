//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Uprobe programs for GGML runtimes. Each program does the least it can on the hot path:
 * read a few registers, reserve one ring-buffer record, fill it, submit. All pairing of
 * events into nodes, graphs and decodes happens in user space. Struct offsets of the
 * target's ggml version come in as read-only constants set at load time.
 *
 * bpf2go builds an object from one file, so this one includes the rest: the shared
 * headers, then a header per layer, each needing only those before it. */
#include "regs.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#include "events.bpf.h"   /* the records: kinds, flags, layouts */
#include "maps.bpf.h"     /* load-time constants, the ring buffer, shared maps */
#include "helpers.bpf.h"  /* traced processes, sampling windows, sending records */
#include "counters.bpf.h" /* perf counter reads */
#include "sched.bpf.h"    /* scheduler tracepoints */
#include "sockets.bpf.h"  /* requests' arrivals, from the socket syscalls */
#include "app.bpf.h"      /* decodes, steps, jobs */
#include "runtime.bpf.h"  /* CPU graphs, nodes, barriers, MoE experts */
#include "device.bpf.h"   /* splits, syncs, copies, device times */
