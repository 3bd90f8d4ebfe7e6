#!/usr/bin/env bash
# Builds the test bench under .testenv/: llama.cpp from node-llama-cpp's bundled release
# source, the node-llama-cpp x64 prebuilt, and the models. Idempotent: every step is keyed on
# a stamp file, so a second run with nothing to do takes seconds.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
TE=$ROOT/.testenv
NLC_VERSION=${NLC_VERSION:-3.22.1}
JOBS=${JOBS:-$(nproc)}
# What to make: all of it; first, all but the later parts, which only a few tests need
# (the older releases' static builds, Ollama's old engine and the arm64 guests'
# llama.cpp); or later, those alone, the rest made by a run before. make test makes the
# first part, then the later one beside the tests, at the CPUs' idle priority.
PART=${1:-all}
case $PART in all | first | later) ;; *) echo "usage: $0 [all|first|later]" >&2 && exit 2 ;; esac
first() { [ "$PART" != later ]; }
later() { [ "$PART" != first ]; }

log() { printf '[testenv] %s\n' "$*" >&2; }

# Heavy outputs are also kept in the machine's cache directory, outside the clone, each
# keyed by everything that goes into it: a fresh clone on the same machine restores them in
# seconds, a fresh machine builds all of them from these scripts. The compilers and this
# machine's CPU (builds for the native CPU) are in the keys of what is compiled.
CACHE=${PROFINFER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profinfer-testbench}
GCC="gcc $(gcc -dumpfullversion 2>/dev/null)"
TOOLS="$GCC cpu $(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)"

# cached NAME KEY DIR BUILD...: DIR holds NAME, made by the command BUILD (run with DIR
# empty) unless DIR's stamp says KEY already. Where the machine's cache holds NAME made
# from KEY, DIR is copied from it instead; else what BUILD made is copied there. Each
# part's time is logged: what it adds to a fresh machine's run.
cached() {
  local name=$1 key=$2 dir=$3 c=$CACHE/$1 t0=$SECONDS
  shift 3
  [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$key" ] && return 0
  rm -rf "$dir" && mkdir -p "$(dirname "$dir")"
  if [ "$(cat "$c/.stamp" 2>/dev/null)" = "$key" ]; then
    cp -a "$c" "$dir"
    log "$name restored from $c in $((SECONDS - t0)) s"
    return 0
  fi
  mkdir -p "$dir"
  "$@"
  echo "$key" >"$dir/.stamp"
  log "$name made in $((SECONDS - t0)) s"
  # The run's timing summary lists each part made (scripts/test.sh).
  [ -z "${PROFINFER_TIMES:-}" ] || printf 'testenv: %s\t%d\t0\n' "$name" $((SECONDS - t0)) >>"$PROFINFER_TIMES"
  if mkdir -p "$CACHE" 2>/dev/null && rm -rf "$c.new" && cp -a "$dir" "$c.new"; then
    rm -rf "$c" && mv "$c.new" "$c"
  else
    log "$name not kept in $CACHE"
  fi
}

# What the builds and the VM tests need from Debian, in one apt run: the VM tests
# (internal/vm) boot Debian's kernels under qemu with busybox as the guest's userland
# (busybox-static, since the guest has no libraries), and the arm64 guests' llama.cpp is
# cross-built with Debian's aarch64 GCC.
need_apt=()
for tool in cmake:cmake ninja:ninja-build git:git node:nodejs npm:npm qemu-system-x86_64:qemu-system-x86 \
    qemu-system-aarch64:qemu-system-arm zstd:zstd aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu \
    aarch64-linux-gnu-g++:g++-aarch64-linux-gnu; do
  command -v "${tool%%:*}" >/dev/null || need_apt+=("${tool#*:}")
done
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need_apt+=(busybox-static)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# node-llama-cpp: its bundled llama.cpp source and the x64 prebuilt, and for the current
# version the x64 Vulkan prebuilt (24 MB), which the GPU tests run on Mesa's software
# driver, the CUDA one (181 MB), whose probe points are checked in its files (no GPU
# here runs it), and the arm64 one (20 MB), whose arm64 code probe placement and layout
# detection are checked on. Other platforms are left out; install scripts are skipped
# because the postinstall would try to fetch or build binaries.
npm_install() { # DIR PACKAGE...
  echo '{"name":"profinfer-testbench","private":true}' >"$1/package.json"
  (cd "$1" && shift && npm install --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error "$@")
}
install_nlc() { # DIR VERSION [PACKAGE...]
  local dir=$1 version=$2
  shift 2
  cached "$(basename "$dir")" "$version${*:+ $*} v2" "$dir" \
    npm_install "$dir" "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version" "${@/%/@$version}"
  cp "$ROOT/scripts/node-driver.mjs" "$dir/driver.mjs"
}
NPM=$TE/npm
install_nlc "$NPM" "$NLC_VERSION" @node-llama-cpp/linux-x64-vulkan @node-llama-cpp/linux-x64-cuda @node-llama-cpp/linux-arm64


# Downloads run in the background while the builds below use the CPUs: the older
# node-llama-cpp prebuilts and the Node addons (their llama.cpp sources are waited for
# before the builds that need them), the kernels, and the Go modules of Ollama's builds
# and the models' writer. Each job's log lines interleave with the builds'.
FUGOOD=$TE/npm-fugood
# Older node-llama-cpp prebuilts, one llama.cpp release each, a quarter or so apart from
# late 2024 (release in bins/linux-x64/_nlcBuildMetadata.json): 3.20.0 b10361, 3.18.0
# b8352, 3.14.0 b6673, 3.12.0 b6122 (the first with ggml_version), 3.10.0 b5640, 3.6.0
# b4753, and 3.3.0 b4234 and 3.1.1 b3889, which have no node probe point. Tens of MB each
# with their JS dependencies, no build. Then the GGML runtimes beside llama.cpp itself:
# whisper.cpp's Node addon, CPU and Vulkan (GGML linked in, OpenMP), and llama.cpp's in
# one addon, each with its workload driver.
fetch_npm() {
  local v
  for v in ${NLC_OLD:-3.20.0 3.18.0 3.14.0 3.12.0 3.10.0 3.6.0 3.3.0 3.1.1}; do
    install_nlc "$TE/npm-$v" "$v"
  done
  cached npm-fugood "whisper 1.1.3 llama 1.7.15 v1" "$FUGOOD" npm_install "$FUGOOD" @fugood/whisper.node@1.1.3 \
    @fugood/node-whisper-linux-x64@1.1.3 @fugood/node-whisper-linux-x64-vulkan@1.1.3 @fugood/llama.node@1.7.15 \
    @fugood/node-llama-linux-x64@1.7.15
  cp "$ROOT/scripts/whisper-driver.mjs" "$ROOT/scripts/llama-node-driver.mjs" "$FUGOOD/"
}

# Their kernels: Debian 11's 5.10 and Debian 12's 6.1 and 6.12, the image alone out of each
# package, and the release that uname -r will say. Beside it, the ELF vmlinux unpacked
# from it: qemu boots that directly (PVH), skipping the xz decompression that takes five
# seconds of every boot under emulation.
KERNELS=$TE/kernels
# The URI (and key) of this machine's Debian source whose suites match $1, from its deb822
# sources: bullseye is fetched from the same mirror, without adding it to those sources.
debian_source() { # SUITE_REGEX
  awk -v re="$1" 'BEGIN { RS = "" } {
    uri = ""; key = ""; ok = 0
    n = split($0, line, "\n")
    for (i = 1; i <= n; i++) {
      m = split(line[i], f, /[ \t]+/)
      if (f[1] == "URIs:") uri = f[2]
      if (f[1] == "Signed-By:") key = f[2]
      if (f[1] == "Suites:") for (j = 2; j <= m; j++) if (f[j] ~ re) ok = 1
    }
    if (ok && uri != "") { print (key == "" ? "" : "[signed-by=" key "] ") uri; exit }
  }' /etc/apt/sources.list.d/debian.sources
}
# The vmlinux inside a bzImage: the first xz or zstd stream that unpacks to an ELF file,
# found the way the kernel's scripts/extract-vmlinux finds it.
extract_vmlinux() { # VMLINUZ OUT
  local magic tool off
  for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd'; do
    tool=${magic%%:*}
    for off in $(LC_ALL=C grep -aboP "${magic#*:}" "$1" | cut -d: -f1); do
      tail -c +$((off + 1)) "$1" | "$tool" -dc 2>/dev/null >"$2" || true
      [ "$(head -c 4 "$2" | od -An -c | tr -d ' ')" = '177ELF' ] && return
    done
  done
  log "no vmlinux found in $1" && return 1
}
# As root, apt downloads as _apt, which cannot write to the temporary directories below.
as_root=(-o APT::Sandbox::User=root)
fetch_kernel() { # DIR NAME PACKAGE [APT OPTIONS...]: the unsigned package, else the signed one
  local dir=$1 name=$2 pkg=$3 tmp deb image
  shift 3
  log "fetching kernel $pkg"
  apt-cache "$@" show "$pkg" >/dev/null 2>&1 || apt-get -qq "$@" update
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get -qq "$@" "${as_root[@]}" download "$pkg-unsigned" 2>/dev/null ||
    apt-get -qq "$@" "${as_root[@]}" download "$pkg"; }) || {
    log "$pkg is not in Debian's archive any more: pick its successor in scripts/testenv.sh"; return 1; }
  deb=$(echo "$tmp"/*.deb)
  image=$(dpkg-deb -c "$deb" | grep -o 'boot/vmlinuz-.*')
  rm -rf "${dir:?}/$name" && mkdir -p "$dir/$name"
  dpkg-deb --fsys-tarfile "$deb" | tar -xO "./$image" >"$dir/$name/vmlinuz"
  # arm64's image is the raw kernel already.
  [[ $pkg == *-arm64 ]] || extract_vmlinux "$dir/$name/vmlinuz" "$dir/$name/vmlinux"
  echo "${image#boot/vmlinuz-}" >"$dir/$name/release"
  rm -rf "$tmp"
}
fetch_x86_kernels() {
  local apt11
  apt11=$(mktemp -d)
  mkdir -p "$apt11/lists/partial"
  echo "deb $(debian_source '^[a-z]+$') bullseye main" >"$apt11/sources.list"
  echo "deb $(debian_source '-security$') bullseye-security main" >>"$apt11/sources.list"
  bullseye=(-o "Dir::Etc::sourcelist=$apt11/sources.list" -o Dir::Etc::sourceparts=/dev/null
            -o "Dir::State::Lists=$apt11/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
  log "listing bullseye's packages"
  apt-get -qq "${bullseye[@]}" "${as_root[@]}" update
  fetch_kernel "$KERNELS" 5.10 linux-image-5.10.0-32-amd64 "${bullseye[@]}"
  rm -rf "$apt11"
  fetch_kernel "$KERNELS" 6.1 linux-image-6.1.0-50-amd64
  fetch_kernel "$KERNELS" 6.12 linux-image-6.12.111+deb12-amd64
}

# The arm64 guests (qemu's virt machine): Debian 12's arm64 6.1 and 6.12, and the arm64
# busybox-static beside them, from the same mirror's arm64 package lists, kept apart from
# this machine's apt state.
KERNELS_ARM64=$TE/kernels-arm64
fetch_arm64_kernels() {
  local aptarm
  aptarm=$(mktemp -d)
  mkdir -p "$aptarm/lists/partial"
  echo "deb $(debian_source '^[a-z]+$') bookworm main" >"$aptarm/sources.list"
  echo "deb $(debian_source '-security$') bookworm-security main" >>"$aptarm/sources.list"
  arm64=(-o "Dir::Etc::sourcelist=$aptarm/sources.list" -o Dir::Etc::sourceparts=/dev/null
         -o "Dir::State::Lists=$aptarm/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
         -o APT::Architecture=arm64 -o APT::Architectures::=arm64)
  log "listing bookworm's arm64 packages"
  apt-get -qq "${arm64[@]}" "${as_root[@]}" update
  fetch_kernel "$KERNELS_ARM64" 6.1 linux-image-6.1.0-50-arm64 "${arm64[@]}"
  fetch_kernel "$KERNELS_ARM64" 6.12 linux-image-6.12.111+deb12-arm64 "${arm64[@]}"
  (cd "$aptarm" && apt-get -qq "${arm64[@]}" "${as_root[@]}" download busybox-static)
  dpkg-deb --fsys-tarfile "$aptarm"/busybox-static_*.deb | tar -xO ./bin/busybox >"$KERNELS_ARM64/busybox"
  chmod 755 "$KERNELS_ARM64/busybox"
  rm -rf "$aptarm"
}
fetch_kernels() {
  cached kernels "5.10.0-32 6.1.0-50 6.12.111+deb12 v2" "$KERNELS" fetch_x86_kernels
  cached kernels-arm64 "6.1.0-50 6.12.111+deb12 busybox-static v2" "$KERNELS_ARM64" fetch_arm64_kernels
}
OLLAMA_VERSION=${OLLAMA_VERSION:-v0.33.0}
OLLAMA_OLD=${OLLAMA_OLD:-v0.24.0} # the last release before 0.30, on its own Go engine
fetch_modules() { # Ollama's two modules and what each requires, and this module's
  local v dir
  for v in "$OLLAMA_VERSION" "$OLLAMA_OLD"; do
    dir=$(cd "$ROOT" && GOFLAGS=-mod=mod go mod download -json "github.com/ollama/ollama@$v" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    (cd "$dir" && go mod download)
  done
  (cd "$ROOT" && go mod download)
}

# llama.cpp from the release bundle: the source, cloned from it, and the tools built from
# it, once per version, into bin/ (RUNPATH $ORIGIN, so that the cache's copy runs anywhere).
# Shared, with OpenMP, the RPC backend, and the layout Ollama ships (GGML_BACKEND_DL: the
# CPU backend a library libggml loads with dlopen), here the one CPU variant this machine
# runs rather than Ollama's fourteen: Ollama's lib/ollama below is this build's llama-server
# and libraries.
LC=$TE/llama.cpp
BUNDLE=$NPM/node_modules/node-llama-cpp/llama/gitRelease.bundle
SRC_KEY="$NLC_VERSION $(sha256sum "$BUNDLE" | cut -c1-16)"
KEY="$SRC_KEY v3 $TOOLS"
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_RPC=ON -DLLAMA_OPENSSL=OFF
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=ON
        -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON)
# ggml refuses GGML_NATIVE with GGML_BACKEND_DL: the variant is named by the instruction
# sets this CPU has instead, as ggml's options call them.
isa=()
for f in sse4_2:SSE42 avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI avx512f:AVX512 \
    avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
  grep -qw "${f%%:*}" /proc/cpuinfo && isa+=("-DGGML_${f#*:}=ON") || isa+=("-DGGML_${f#*:}=OFF")
done
shared=(-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_NATIVE=OFF "${isa[@]}")
if [ "$(cat "$LC/src/.stamp" 2>/dev/null)" != "$SRC_KEY" ]; then
  rm -rf "$LC/src" && mkdir -p "$LC"
  git clone -q "$BUNDLE" "$LC/src" 2>/dev/null
  echo "$SRC_KEY" >"$LC/src/.stamp"
fi

# A portable llama.cpp for the guests: static down to libc, since they have no libraries,
# and built for any x86-64 with AVX2 instead of this machine's CPU: qemu's has no AVX-512.
# ggml's own threadpool rather than OpenMP, whose libgomp CMake links as a shared object
# only. Its llama-server is also the host's static one (GGML and llama inside the
# executable, as many production images ship it): one static build instead of two.
# Its own build tree, removed once the tools are copied out.
build_portable() { # DIR MINUTES [CMAKE OPTIONS...]: into $LC/DIR
  local dir=$1
  shift
  cached "$dir" "$SRC_KEY $dir-v3 $GCC" "$LC/$dir" portable "$dir" "$@"
}
portable() { # DIR MINUTES [CMAKE OPTIONS...]
  local dir=$1 minutes=$2 build=$LC/build-$1 tools=(llama-bench llama-server)
  shift 2
  [ "$dir" = portable ] && tools+=(test-llama-archs) # the models' writer, below
  log "building $dir ${tools[*]}; about $minutes minutes on 2 cores"
  rm -rf "$build"
  cmake -S "$LC/src" -B "$build" "${common[@]}" -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
      -DGGML_OPENMP=OFF -DGGML_RPC=OFF -DCMAKE_EXE_LINKER_FLAGS=-static "$@" >/dev/null
  cmake --build "$build" -j "$JOBS" --target "${tools[@]}"
  for t in "${tools[@]}"; do
    if readelf -lW "$build/bin/$t" | grep -q INTERP; then
      log "$t is not fully static" && exit 1
    fi
    cp "$build/bin/$t" "$LC/$dir/$t"
  done
  rm -rf "$build"
}

# The later part's downloads were the first part's.
if first; then
  fetch_npm & npm_job=$!
  fetch_kernels & kernels_job=$!
  fetch_modules & modules_job=$!
fi

build_llama() {
  log "building llama.cpp ($KEY); about 7 minutes on 2 cores"
  local build=$LC/build
  rm -rf "$build"
  cmake -S "$LC/src" -B "$build" "${common[@]}" "${shared[@]}" >/dev/null
  cmake --build "$build" -j "$JOBS" --target llama-bench llama-server llama-quantize \
      test-backend-ops test-llama-archs ggml-rpc-server ggml-cpu
  cp -a "$build/bin/." "$LC/bin/"
  rm -rf "$build"
}
cached llama.cpp "$KEY" "$LC/bin" build_llama

# Static llama-bench builds of older releases, from the source bundled with their
# node-llama-cpp: GGML linked into the executable, with OpenMP (the default then), where
# the prebuilts use ggml's own threadpool; for the instruction sets /proc/cpuinfo lists, as
# the build above (options the older CMake lacks go unused). About a minute each on 2 cores.
build_old_static() { # NODE_LLAMA_CPP_VERSION RELEASE
  local dir=$TE/llama.cpp-$2 bundle=$TE/npm-$1/node_modules/node-llama-cpp/llama/gitRelease.bundle
  cached "llama.cpp-$2" "$2 $(sha256sum "$bundle" | cut -c1-16) v3 $TOOLS" "$dir/static" old_static "$bundle" "$dir"
}
old_static() { # BUNDLE DIR
  log "building static llama-bench $(basename "$2")"
  rm -rf "$2/src" "$2/build"
  git clone -q "$1" "$2/src" 2>/dev/null
  cmake -S "$2/src" -B "$2/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF \
      -DGGML_NATIVE=OFF "${isa[@]}" >/dev/null
  cmake --build "$2/build" -j "$JOBS" --target llama-bench >/dev/null
  cp "$2/build/bin/llama-bench" "$2/static/llama-bench"
  rm -rf "$2/build" "$2/src"
}
if first; then wait "$npm_job"; fi
if later; then
  build_old_static 3.1.1 b3889
  build_old_static 3.3.0 b4234
fi

# Ollama as it ships (0.30 on): its Go executable, built from its module, and the
# lib/ollama it starts llama-server from: the build above, which is Ollama's layout, from
# the same llama.cpp source Ollama's CMake project would build. Ollama's one patch of that
# source (hooks that translate blobs of its own older format) does not apply to it, and
# is left out, as Ollama's OLLAMA_LLAMA_CPP_SOURCE leaves it out of a local tree's build.
if first; then wait "$modules_job"; fi
module_src() { # MODULE@VERSION DIR: a writable copy of the module's tree
  local mod
  mod=$(cd "$ROOT" && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$mod" ] || { log "go mod download $1 failed"; return 1; }
  cp -r "$mod" "$2" && chmod -R u+w "$2"
}
build_ollama() { # DIR
  local dir=$1 src=$1/.src
  log "building Ollama $OLLAMA_VERSION; about 3 minutes on 2 cores"
  module_src "github.com/ollama/ollama@$OLLAMA_VERSION" "$src"
  (cd "$src" && CGO_ENABLED=1 go build -trimpath -buildmode=pie \
      -ldflags "-X=github.com/ollama/ollama/version.Version=${OLLAMA_VERSION#v}" -o "$dir/bin/ollama" .)
  rm -rf "$src"
}
cached ollama "$OLLAMA_VERSION v2 $(go env GOVERSION)" "$TE/ollama" build_ollama "$TE/ollama"
if first; then # not while a later part's tests run Ollama
  rm -rf "$TE/ollama/lib/ollama" && mkdir -p "$TE/ollama/lib/ollama"
  cp -a "$LC/bin/llama-server" "$LC/bin/llama-quantize" "$LC/bin/"lib*.so* "$TE/ollama/lib/ollama/"
fi

# Ollama before 0.30, whose own Go engine computes through cgo (ggml and llama.cpp inside
# the executable, no CMake). Module zips leave out what lies under a vendor directory, and
# its llama.cpp's tools need four headers from there: the test bench's llama.cpp has them.
# Compiled without cgo's default -g: profinfer reads symbols, never DWARF, and the C++'s
# debug information was a quarter of the build (305 s against 398 s on 2 cores).
build_ollama_old() { # DIR
  local dir=$1 src=$1/.src h
  log "building Ollama $OLLAMA_OLD (its Go engine, ggml through cgo); about 6 minutes on 2 cores"
  module_src "github.com/ollama/ollama@$OLLAMA_OLD" "$src"
  for h in nlohmann/json.hpp nlohmann/json_fwd.hpp stb/stb_image.h miniaudio/miniaudio.h; do
    mkdir -p "$src/llama/llama.cpp/vendor/$(dirname "$h")"
    cp "$LC/src/vendor/$h" "$src/llama/llama.cpp/vendor/$h"
  done
  (cd "$src" && CGO_ENABLED=1 CGO_CFLAGS=-O2 CGO_CXXFLAGS=-O2 \
      go build -ldflags "-X=github.com/ollama/ollama/version.Version=${OLLAMA_OLD#v}" -o "$dir/ollama" .)
  rm -rf "$src"
}
if later; then
  cached ollama-old "$OLLAMA_OLD $SRC_KEY v2 $TOOLS $(go env GOVERSION)" "$TE/ollama-old" build_ollama_old "$TE/ollama-old"
fi

build_portable portable 10

# Models: the llama ones from test-llama-archs (the portable build's: the shared build's
# loads no backend, as GGML_BACKEND_DL wants) and the project's GGUF writer, quantised by
# llama-quantize; whisper's, in its legacy format, and a recording to transcribe.
MODELS=$TE/models
make_models() {
  log "writing the models"
  local tmp
  tmp=$(mktemp -d)
  "$LC/portable/test-llama-archs" -a '^llama$' -o "$tmp" >/dev/null 2>&1
  mv "$tmp/llama-dense.gguf" "$MODELS/tiny-dense.gguf"
  mv "$tmp/llama-moe.gguf" "$MODELS/tiny-moe.gguf"
  rm -rf "$tmp"
  for m in llama-1b moe llama-128k; do
    (cd "$ROOT" && go run ./internal/testbench/cmd/mkmodel -arch "$m" -o "$MODELS/$m-f16.gguf")
  done
  for q in q4_0 q8_0; do
    "$LC/bin/llama-quantize" "$MODELS/llama-1b-f16.gguf" "$MODELS/llama-1b-$q.gguf" "${q^^}" >/dev/null 2>&1
  done
  "$LC/bin/llama-quantize" "$MODELS/moe-f16.gguf" "$MODELS/moe-q4_0.gguf" Q4_0 >/dev/null 2>&1
  rm -f "$MODELS/moe-f16.gguf" # llama-1b-f16 stays: a comparison's other quantisation
  # Small, F16: what the MoE ones are for is their routing, deep-narrow's its many
  # small nodes.
  for m in moe-even moe-hot deep-narrow; do
    (cd "$ROOT" && go run ./internal/testbench/cmd/mkmodel -arch "$m" -o "$MODELS/$m.gguf")
  done
  for m in whisper-micro whisper-tiny; do
    (cd "$ROOT" && go run ./internal/testbench/cmd/mkmodel -arch "$m" -o "$MODELS/$m.bin")
  done
  (cd "$ROOT" && go run ./internal/testbench/cmd/mkmodel -wav 3 -o "$MODELS/speech-3s.wav")
}
# Keyed by the writer's sources and make_models itself: a model added there is made.
cached models "$KEY $SRC_KEY v3 $(cd "$ROOT" && { declare -f make_models; cat internal/testbench/model.go internal/testbench/whisper.go internal/testbench/cmd/mkmodel/main.go internal/gguf/*.go; } | sha256sum | cut -c1-16)" \
  "$MODELS" make_models


# The same for the arm64 guests, cross-built with Debian's aarch64 GCC for any ARMv8-A CPU
# (NEON and no more), as a static arm64 image of llama.cpp would be (a later part).
if later; then
  build_portable portable-arm64 10 -DLLAMA_BUILD_TESTS=OFF -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
      -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++
fi
if first; then wait "$kernels_job"; fi
log "ready: $LC/bin, $LC/portable, $LC/portable-arm64, $MODELS, $KERNELS, $KERNELS_ARM64, $FUGOOD, $TE/ollama, $TE/ollama-old"
