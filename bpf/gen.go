// Package bpf holds profinfer's eBPF programs and their bpf2go-generated loaders. The
// generated Go files and objects are committed, so building needs no clang. Both targets
// are built on either machine: the only machine headers the programs reach (asm/types.h
// and its like, under linux/types.h) give the same fixed-width types on x86-64 and arm64,
// and each machine finds its own in its multiarch directory.
package bpf

//go:generate go tool -modfile=../tools/go.mod bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type kind -type event -type detail -type counted -type batch -type seq_tokens -type graph_record -type device_times -type timed_node Profinfer profinfer.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
//go:generate go tool -modfile=../tools/go.mod bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 Watch watch.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
