#!/usr/bin/env bash
# avx2host.sh COMMAND...: runs COMMAND as on an x86-64 host with AVX2 and no AVX-512 (the
# 2-core EPYC hosts CI lands on at times, where the test bench decodes at about half the
# pace), on a machine that has AVX-512: the place to find a test that holds at one host's
# pace only. For example, a whole run as CI runs it: scripts/avx2host.sh bash .ci/run
#
# In a mount namespace of its own, /proc/cpuinfo lists no AVX-512 or AVX-VNNI, so the test
# bench builds llama.cpp for AVX2 (its builds take their instruction sets from that file)
# and profinfer reads the host, and measures its roofs, as AVX2.
# What stays this machine's: its clock, caches and memory; and the prebuilt runtimes that
# pick their CPU variant by cpuid (node-llama-cpp's, whisper's addon), and containers,
# which mount a /proc of their own, still see AVX-512.
# The test bench's cache is a copy of the machine's, and profinfer's state directory (the
# roofs it measured) one of its own, so that what was made for this CPU stays as it was.
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: $0 COMMAND..." >&2 && exit 2; }
[ "$(id -u)" = 0 ] || { echo "avx2host: needs root, for a mount namespace of its own" >&2 && exit 1; }
grep -qw avx2 /proc/cpuinfo || { echo "avx2host: this CPU has no AVX2" >&2 && exit 1; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/profinfer-testbench
export PROFINFER_CACHE=$cache-avx2
if [ ! -d "$PROFINFER_CACHE" ] && [ -d "$cache" ]; then
  cp -a "$cache" "$PROFINFER_CACHE"
fi

mkdir -p "$PROFINFER_CACHE"
cpuinfo=$PROFINFER_CACHE/.cpuinfo
sed -E '/^flags/ s/ (avx512[a-z0-9_]*|avx_vnni[a-z0-9_]*|avx_ifma|avx_ne_convert|amx_[a-z0-9_]*)\b//g' \
    /proc/cpuinfo >"$cpuinfo"
state=$PROFINFER_CACHE/.state
mkdir -p "$state" /var/lib/profinfer
exec unshare --mount --propagation private bash -c \
    'mount --bind "$0" /proc/cpuinfo && mount --bind "$1" /var/lib/profinfer && shift && exec "$@"' \
    "$cpuinfo" "$state" "$@"
