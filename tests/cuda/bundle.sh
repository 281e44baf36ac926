#!/usr/bin/env bash
# Packs a CUDA-enabled build's test program and CLI with the shared libraries they load, so that
# device_check.sh can run them (PREBUILT=DIR) on a GPU machine that lacks the project's Debian
# dependencies: the GPU machine needs only its driver, nvcc (for the kernel check) and a glibc at
# least as new as the build machine's.
#
#   tests/cuda/bundle.sh OUT_DIR [BUILD_DIR]     # BUILD_DIR: default build/release
#
# OUT_DIR gets kvc_tests, kvchat-cli and lib/ (every library ldd lists but the C and C++
# runtimes, which the GPU machine has). Both programs and the libraries get an RPATH of
# $ORIGIN/lib (DT_RPATH, which also serves the libraries' own dependencies), so nothing else
# on that machine sees them. The test program keeps the source and build paths it was compiled
# with (tests/data, the test models): run it from a checkout at the same path.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
build=${2:-$root/build/release}
command -v patchelf >/dev/null || { echo "bundle: patchelf is needed (apt-get install patchelf)" >&2; exit 2; }
bins=("$build/tests/kvc_tests" "$build/app/kvchat-cli")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "bundle: $b is not built" >&2; exit 2; }
done
grep -q '^KVC_CUDA:BOOL=ON' "$build/CMakeCache.txt" ||
  echo "bundle: warning: $build was configured without CUDA; its programs have no CUDA backend" >&2
rm -rf "$out"
mkdir -p "$out/lib"
# The libraries every Linux machine brings with its compiler: glibc's and the C++ runtime.
system_lib='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so'
for b in "${bins[@]}"; do
  cp "$b" "$out/"
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $system_lib ]] && continue
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done
done
# shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not the shell
for f in "$out"/kvc_tests "$out"/kvchat-cli; do patchelf --force-rpath --set-rpath '$ORIGIN/lib' "$f"; done
# shellcheck disable=SC2016
for f in "$out"/lib/*; do patchelf --force-rpath --set-rpath '$ORIGIN' "$f"; done
du -sh "$out"
