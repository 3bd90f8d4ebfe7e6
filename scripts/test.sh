#!/usr/bin/env bash
# make test: the test bench, the collector, then every package's tests, the end-to-end
# ones (build tag e2e) among them; it ends with the run's timing summary, each step's
# minutes and the slowest tests', whether it passed or not. Steps are timed into
# $PROFINFER_TIMES (build/times.tsv; .ci/run times its own steps there first and sets
# PROFINFER_TIMES_APPEND), the test events kept in build/test.json.
#
# What only a few tests need (the test bench's later part: the older releases' static
# builds, Ollama's old engine and the arm64 guests' llama.cpp; and the arm64 collector,
# some 16 minutes of both cores from nothing) is built beside the tests, at the CPUs'
# idle priority (SCHED_IDLE): it takes the time the tests leave idle, waiting on servers,
# sampling windows and pages (about half of it), and gives way to them at once. The tests
# that need it run last.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
mkdir -p build
export PROFINFER_TIMES=${PROFINFER_TIMES:-$PWD/build/times.tsv}
[ -n "${PROFINFER_TIMES_APPEND:-}" ] || : >"$PROFINFER_TIMES"

# step NAME CMD...: runs CMD, and notes its seconds and exit status.
step() {
  local name=$1 t0=$SECONDS rc
  shift
  "$@"
  rc=$?
  printf '%s\t%d\t%d\n' "$name" $((SECONDS - t0)) "$rc" >>"$PROFINFER_TIMES"
  return "$rc"
}
summary() { "$GO" run ./internal/testbench/cmd/testlog -steps "$PROFINFER_TIMES" </dev/null; }

if ! step testenv scripts/testenv.sh first || ! step "make build" make build ||
  ! step "build testlog" "$GO" build -o build/testlog ./internal/testbench/cmd/testlog; then
  summary
  exit 1
fi
# The machine's roofs, measured while nothing else runs and kept where every collector
# of the tests reads them (the receiver's default roofline.state_file): measured first
# beside the later builds, they would be provisional, and low, until those end. A probe
# ten times the collector's gives each roof trials enough to agree (the working-set
# ladder's sizes one 20 ms trial each at 400 ms), and every collector's start adds its own.
roofs() { for _ in 1 2 3 4 5; do "$GO" run ./cmd/profinfer roofs -probe 4s && return; sleep 5; done; }
step "roofs, measured idle" roofs
later() { scripts/testenv.sh later && make build-arm64; }
# chrt's SCHED_IDLE where the kernel lets this process set it (it may not in a container).
idle=(chrt --idle 0)
"${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
rm -f build/later.status
(
  step "testenv later and make build-arm64, beside the tests" "${idle[@]}" bash -c "$(declare -f later); later"
  echo $? >build/later.status
) >build/later.log 2>&1 &

# -p 1: the e2e tests target executables by path, so another package's llama.cpp
# processes running meanwhile would be profiled too.
late='^(TestE2EKernels|TestE2EMultiArchImage|TestBuildPortableARM64|TestE2ECompareRelease|TestE2EOldStaticBuilds|TestE2EOllamaEngine|TestE2ESIMD|TestBuildBench|TestReadBuild|TestContextFromBenchBuilds)$'
{
  "$GO" test -json -tags e2e -p 1 -count=1 -timeout 60m -skip "$late" ./...
  # The pipeline's subshell cannot wait for the builds: they leave their status.
  until [ -s build/later.status ]; do sleep 2; done
  if [ "$(cat build/later.status)" != 0 ]; then
    echo "the later builds failed (build/later.log):"
    tail -20 build/later.log
  fi
  # Without the builds, these say what is missing. -parallel 3: the kernel matrix's
  # guests, each on one host thread, three at a time.
  "$GO" test -json -tags e2e -p 1 -parallel 3 -count=1 -timeout 30m -run "$late" ./internal/ggml/ ./internal/simd/ ./receiver/
} 2>&1 | build/testlog -events build/test.json -steps "$PROFINFER_TIMES"
