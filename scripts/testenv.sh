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

log() { printf '[testenv] %s\n' "$*" >&2; }

need_apt=()
for tool in cmake:cmake ninja:ninja-build git:git node:nodejs npm:npm; do
  command -v "${tool%%:*}" >/dev/null || need_apt+=("${tool#*:}")
done
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
install_nlc() { # DIR VERSION [PACKAGE...]
  local dir=$1 version=$2 stamp
  shift 2
  stamp="$version${*:+ $*}"
  if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "installing node-llama-cpp@$version $*"
    rm -rf "$dir" && mkdir -p "$dir"
    echo '{"name":"profinfer-testbench","private":true}' >"$dir/package.json"
    (cd "$dir" && npm install --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error \
        "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version" "${@/%/@$version}")
    echo "$stamp" >"$dir/.stamp"
  fi
  cp "$ROOT/scripts/node-driver.mjs" "$dir/driver.mjs"
}
NPM=$TE/npm
install_nlc "$NPM" "$NLC_VERSION" @node-llama-cpp/linux-x64-vulkan @node-llama-cpp/linux-x64-cuda @node-llama-cpp/linux-arm64

# Older node-llama-cpp prebuilts, one llama.cpp release each, a quarter or so apart from
# late 2024 (release in bins/linux-x64/_nlcBuildMetadata.json): 3.20.0 b10361, 3.18.0
# b8352, 3.14.0 b6673, 3.12.0 b6122 (the first with ggml_version), 3.10.0 b5640, 3.6.0
# b4753, and 3.3.0 b4234 and 3.1.1 b3889, which have no node probe point. Tens of MB each
# with their JS dependencies, no build.
for v in ${NLC_OLD:-3.20.0 3.18.0 3.14.0 3.12.0 3.10.0 3.6.0 3.3.0 3.1.1}; do
  install_nlc "$TE/npm-$v" "$v"
done

# llama.cpp from the release bundle, built once per version.
LC=$TE/llama.cpp
BUNDLE=$NPM/node_modules/node-llama-cpp/llama/gitRelease.bundle
KEY="$NLC_VERSION $(sha256sum "$BUNDLE" | cut -c1-16) v2"
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_RPC=ON -DLLAMA_OPENSSL=OFF
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=ON
        -DLLAMA_BUILD_EXAMPLES=OFF)
if [ "$(cat "$LC/.stamp" 2>/dev/null)" != "$KEY" ]; then
  log "building llama.cpp ($KEY); about 8 minutes on 2 cores"
  rm -rf "$LC" && mkdir -p "$LC"
  git clone -q "$BUNDLE" "$LC/src" 2>/dev/null
  cmake -S "$LC/src" -B "$LC/build" "${common[@]}" >/dev/null
  cmake --build "$LC/build" -j "$JOBS" --target llama-bench llama-server llama-quantize \
      test-backend-ops test-llama-archs ggml-rpc-server
  ln -sfn build/bin "$LC/bin"
  echo "$KEY" >"$LC/.stamp"
fi

# Static llama-bench builds of older releases, from the source bundled with their
# node-llama-cpp: GGML linked into the executable, with OpenMP (the default then), where
# the prebuilts use ggml's own threadpool. About a minute each on 2 cores.
build_old_static() { # NODE_LLAMA_CPP_VERSION RELEASE
  local dir=$TE/llama.cpp-$2 bundle=$TE/npm-$1/node_modules/node-llama-cpp/llama/gitRelease.bundle
  local key
  key="$2 $(sha256sum "$bundle" | cut -c1-16) v1"
  [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$key" ] && return
  log "building static llama-bench $2"
  rm -rf "$dir" && mkdir -p "$dir/static"
  git clone -q "$bundle" "$dir/src" 2>/dev/null
  cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF >/dev/null
  cmake --build "$dir/build" -j "$JOBS" --target llama-bench >/dev/null
  cp "$dir/build/bin/llama-bench" "$dir/static/llama-bench"
  rm -rf "$dir/build"
  echo "$key" >"$dir/.stamp"
}
build_old_static 3.1.1 b3889
build_old_static 3.3.0 b4234

# Models.
MODELS=$TE/models
mkdir -p "$MODELS"
if [ ! -f "$MODELS/tiny-dense.gguf" ] || [ ! -f "$MODELS/tiny-moe.gguf" ]; then
  log "generating tiny models with test-llama-archs"
  tmp=$(mktemp -d)
  "$LC/bin/test-llama-archs" -a '^llama$' -o "$tmp" >/dev/null 2>&1
  mv "$tmp/llama-dense.gguf" "$MODELS/tiny-dense.gguf"
  mv "$tmp/llama-moe.gguf" "$MODELS/tiny-moe.gguf"
  rm -rf "$tmp"
fi
for m in llama-1b moe; do
  [ -f "$MODELS/$m-f16.gguf" ] || [ -f "$MODELS/$m-q4_0.gguf" ] || {
    log "writing $m-f16.gguf"
    (cd "$ROOT" && go run ./internal/testbench/cmd/mkmodel -arch "$m" -o "$MODELS/$m-f16.gguf")
  }
done
for q in q4_0 q8_0; do
  [ -f "$MODELS/llama-1b-$q.gguf" ] || "$LC/bin/llama-quantize" "$MODELS/llama-1b-f16.gguf" "$MODELS/llama-1b-$q.gguf" "${q^^}" >/dev/null 2>&1
done
[ -f "$MODELS/moe-q4_0.gguf" ] || "$LC/bin/llama-quantize" "$MODELS/moe-f16.gguf" "$MODELS/moe-q4_0.gguf" Q4_0 >/dev/null 2>&1
rm -f "$MODELS"/*-f16.gguf

# The VM tests (internal/vm) boot Debian's kernels under qemu with busybox as the guest's
# userland: busybox-static, since the guest has no libraries.
vm_apt=()
command -v qemu-system-x86_64 >/dev/null || vm_apt+=(qemu-system-x86)
command -v qemu-system-aarch64 >/dev/null || vm_apt+=(qemu-system-arm)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || vm_apt+=(busybox-static)
command -v zstd >/dev/null || vm_apt+=(zstd)
if [ ${#vm_apt[@]} -gt 0 ]; then
  log "installing ${vm_apt[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${vm_apt[@]}" >/dev/null
fi

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
kernel_done() { [ "$(cat "$1/$2/.stamp" 2>/dev/null)" = "$3 v1" ]; } # DIR NAME PACKAGE
fetch_kernel() { # DIR NAME PACKAGE [APT OPTIONS...]: the unsigned package, else the signed one
  local dir=$1 name=$2 pkg=$3 tmp deb image
  shift 3
  kernel_done "$dir" "$name" "$pkg" && return
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
  echo "$pkg v1" >"$dir/$name/.stamp"
}
if ! kernel_done "$KERNELS" 5.10 linux-image-5.10.0-32-amd64; then
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
fi
fetch_kernel "$KERNELS" 6.1 linux-image-6.1.0-50-amd64
fetch_kernel "$KERNELS" 6.12 linux-image-6.12.111+deb12-amd64

# The arm64 guests (qemu's virt machine): Debian 12's arm64 6.1 and 6.12, and the arm64
# busybox-static beside them, from the same mirror's arm64 package lists, kept apart from
# this machine's apt state.
KERNELS_ARM64=$TE/kernels-arm64
if ! kernel_done "$KERNELS_ARM64" 6.1 linux-image-6.1.0-50-arm64 ||
   ! kernel_done "$KERNELS_ARM64" 6.12 linux-image-6.12.111+deb12-arm64 ||
   [ ! -f "$KERNELS_ARM64/.busybox" ]; then
  aptarm=$(mktemp -d)
  mkdir -p "$aptarm/lists/partial" "$KERNELS_ARM64"
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
  echo "$(basename "$aptarm"/busybox-static_*.deb)" >"$KERNELS_ARM64/.busybox"
  rm -rf "$aptarm"
fi

# A portable llama.cpp for the guests: static down to libc, since they have no libraries,
# and built for any x86-64 with AVX2 instead of this machine's CPU: qemu's has no AVX-512.
# ggml's own threadpool rather than OpenMP, whose libgomp CMake links as a shared object
# only. Its llama-server is also the host's static one (GGML and llama inside the
# executable, as many production images ship it): one static build instead of two.
# Its own build tree, removed once the tools are copied out.
build_portable() { # DIR MINUTES [CMAKE OPTIONS...]: into $LC/DIR
  local dir=$1 minutes=$2 build=$LC/build-$1
  shift 2
  [ "$(cat "$LC/.stamp-$dir" 2>/dev/null)" = "$KEY $dir-v1" ] && return
  log "building $dir llama-bench and llama-server; about $minutes minutes on 2 cores"
  rm -rf "$build"
  cmake -S "$LC/src" -B "$build" "${common[@]}" -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
      -DGGML_OPENMP=OFF -DGGML_RPC=OFF -DLLAMA_BUILD_TESTS=OFF -DCMAKE_EXE_LINKER_FLAGS=-static "$@" >/dev/null
  cmake --build "$build" -j "$JOBS" --target llama-bench llama-server
  mkdir -p "$LC/$dir"
  for t in llama-bench llama-server; do
    if readelf -lW "$build/bin/$t" | grep -q INTERP; then
      log "$t is not fully static" && exit 1
    fi
    cp "$build/bin/$t" "$LC/$dir/$t"
  done
  rm -rf "$build"
  echo "$KEY $dir-v1" >"$LC/.stamp-$dir"
}
build_portable portable 10

# The same for the arm64 guests, cross-built with Debian's aarch64 GCC for any ARMv8-A CPU
# (NEON and no more), as a static arm64 image of llama.cpp would be.
if ! command -v aarch64-linux-gnu-g++ >/dev/null; then
  log "installing gcc-aarch64-linux-gnu g++-aarch64-linux-gnu"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-aarch64-linux-gnu g++-aarch64-linux-gnu >/dev/null
fi
build_portable portable-arm64 10 -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
    -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++
log "ready: $LC/bin, $LC/portable, $LC/portable-arm64, $MODELS, $KERNELS, $KERNELS_ARM64"
