#!/usr/bin/env bash
# make test: the test bench, the collector for this machine and for arm64, then every
# package's tests, the end-to-end ones (build tag e2e) among them; it ends with the run's
# timing summary, each step's minutes and the slowest tests', whether it passed or not.
# Steps are timed into $PROFINFER_TIMES (build/times.tsv; .ci/run times its own steps
# there first and sets PROFINFER_TIMES_APPEND), the test events kept in build/test.json.
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
testlog() { "$GO" run ./internal/testbench/cmd/testlog -steps "$PROFINFER_TIMES" "$@"; }

if ! step testenv scripts/testenv.sh || ! step "make build" make build || ! step "make build-arm64" make build-arm64; then
  testlog </dev/null
  exit 1
fi
# -p 1: the e2e tests target executables by path, so another package's llama.cpp
# processes running meanwhile would be profiled too.
"$GO" build -o build/testlog ./internal/testbench/cmd/testlog
"$GO" test -json -tags e2e -p 1 -count=1 -timeout 60m ./... 2>&1 |
  build/testlog -events build/test.json -steps "$PROFINFER_TIMES"
