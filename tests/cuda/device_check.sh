#!/usr/bin/env bash
# The CUDA checks for a machine WITH a GPU, as one prepared run: build with the GPU's own
# architecture, make the test models, run the [cuda] tests, make TinyLlama-shaped models, bench
# CPU vs CUDA and the KV cache, measure device memory bandwidth, and write a Markdown report to
# ${OUT:-./cuda-report}. Everything it needs is in the repository.
#
#   tests/cuda/device_check.sh            # the whole run (about 5 minutes on 16 cores)
#   DRY_RUN=1 tests/cuda/device_check.sh  # print the plan, run nothing
#   JOBS=n BUDGET_S=s                     # build jobs; the whole run's time limit (default 450 s)
#   PREBUILT=DIR                          # no configure or build: take kvc_tests and kvchat-cli
#                                         # from DIR, made by tests/cuda/bundle.sh on a machine with
#                                         # the project's dependencies (they need a checkout at the
#                                         # build's path; BUILD_DIR must be that build's folder)
#
# Every step has its own time limit, cut to what is left of BUDGET_S, and a failed step does
# not stop the run: the report says which steps failed and keeps the last lines of their
# output. Exit status: 0 when every step passed, 1 when any failed (each is named on stderr
# and in the report), 77 without a GPU (nothing was checked).
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/cuda-report}
vocab=$root/tests/data/vocab/ggml-vocab-llama-spm.gguf
failed=()
jobs=${JOBS:-16}
arch=${CUDA_ARCH:-native}  # nvcc -arch for the kernel check and the bandwidth probe
build=${BUILD_DIR:-$root/build/device}
cli=$build/app/kvchat-cli
mkdir -p "$out"
report=$out/cuda-report.md
log=$out/device-check.log
: >"$log"
steps=()
t_begin=$(date +%s)
budget=${BUDGET_S:-450}

# step NAME LIMIT_S CMD...: runs CMD under timeout, appends its output to the log.
step() {
  local name=$1 limit=$2
  shift 2
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "would run [$name, ${limit}s]: $*"
    steps+=("| $name | dry run | 0 |")
    return 0
  fi
  local t0 rc left
  t0=$(date +%s)
  left=$((budget - (t0 - t_begin)))
  if [ "$left" -lt 15 ]; then
    steps+=("| $name | not run: the ${budget}s budget is spent | 0 |")
    failed+=("$name")
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name: $*" >>"$log"
  if declare -F "$1" >/dev/null; then  # a function of this script: run it in a subshell
    timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); root='$root' build='$build' jobs='$jobs' arch='$arch'; $*" \
      >"$out/.step.out" 2>&1
  else
    timeout --kill-after=10 "$limit" "$@" >"$out/.step.out" 2>&1
  fi
  rc=$?
  cat "$out/.step.out" >>"$log"
  local dt=$(($(date +%s) - t0))
  local status=ok
  [ $rc -ne 0 ] && status="FAILED (exit $rc)"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && status="TIMED OUT after ${limit}s"
  steps+=("| $name | $status | $dt |")
  echo "[$name] $status in ${dt}s"
  [ $rc -ne 0 ] && failed+=("$name")
  return $rc
}

finish() {
  rm -f "$out/.step.out"
  {
    echo "# CUDA device check"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "- GPU: ${gpu:-none}"
    echo "- total: $(($(date +%s) - t_begin)) s"
    echo
    echo "| step | result | seconds |"
    echo "|---|---|---|"
    printf '%s\n' "${steps[@]}"
    echo
    for f in "$out"/section-*.md; do [ -f "$f" ] && cat "$f" && echo && rm -f "$f"; done
    echo "Full output of every step: device-check.log"
    [ ${#failed[@]} -gt 0 ] && echo && echo "**Failed: ${failed[*]}**"
  } >"$report"
  echo "report: $report"
}

have() { [ "${DRY_RUN:-0}" = 1 ] || [ -e "$1" ]; }  # a file, or anything in a dry run

section() {  # section NAME TITLE [N]: the last N lines of step NAME's output, as a report section
  local name=$1 title=$2
  [ "${DRY_RUN:-0}" = 1 ] && return 0
  {
    echo "## $title"
    echo
    echo '```'
    awk -v s="=== $name:" 'index($0, s) == 1 {on = 1; next} /^=== / {on = 0} on' "$log" | tail -n "${3:-40}"
    echo '```'
  } >"$out/section-$name.md"
}

# 1. Is there a GPU?
gpu=
if [ "${DRY_RUN:-0}" != 1 ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && gpu=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1) && [ -n "$gpu" ]; then
    steps+=("| gpu | $gpu | 0 |")
  else
    gpu=
    steps+=("| gpu | no GPU (nvidia-smi missing or found no device): stopped | 0 |")
    echo "no GPU: nothing to check on this machine" >&2
    finish
    exit 77
  fi
fi

# 2. The kernels alone against the CPU reference: needs only nvcc and g++, so it runs even
#    where the project's Debian dependencies (sentencepiece, Catch2, ...) are missing.
build_kernel_check() {
  local kdir=$build/kernel-check f flags
  rm -rf "$kdir"
  mkdir -p "$kdir"
  for f in "$root"/kernels/cpu/*.cpp "$root"/kernels/cuda/*.cu "$root"/tests/cuda/kernel_check.cu; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    case $f in
      *.cu) flags="nvcc -std=c++17 -O2 -arch=$arch --expt-relaxed-constexpr" ;;
      *_avx2.cpp) flags="g++ -std=c++20 -O2 -fno-math-errno -mavx2 -mfma -mf16c" ;;
      *_avx512.cpp) flags="g++ -std=c++20 -O2 -fno-math-errno -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni" ;;
      *) flags="g++ -std=c++20 -O2 -fno-math-errno" ;;
    esac
    # shellcheck disable=SC2086
    ($flags -I"$root" -c "$f" -o "$kdir/$(basename "$f").o" || echo "$f" >>"$kdir/failed") &
  done
  wait
  if [ -f "$kdir/failed" ]; then
    echo "compile failed: $(cat "$kdir/failed")"
    return 1
  fi
  nvcc -arch="$arch" -o "$kdir/kernel_check" "$kdir"/*.o -lpthread
}
step kernel-check-build 150 build_kernel_check && step kernel-check 60 "$build/kernel-check/kernel_check"
section kernel-check "Kernels vs the CPU reference (tests/cuda/kernel_check.cu)" 45

# 3. Configure and build the project for this GPU only (native), tests included.
# Warnings stay warnings here (CI's gcc enforces -Werror): a newer compiler's new warning must
# not hide the GPU results. With PREBUILT, the bundle's programs instead.
if [ -n "${PREBUILT:-}" ]; then
  place_prebuilt() {
    mkdir -p "$build/tests" "$build/app" &&
      cp "$PREBUILT/kvc_tests" "$build/tests/" && cp "$PREBUILT/kvchat-cli" "$build/app/" &&
      rm -rf "$build/tests/lib" "$build/app/lib" &&
      cp -r "$PREBUILT/lib" "$build/tests/lib" && cp -r "$PREBUILT/lib" "$build/app/lib"
  }
  step prebuilt 60 place_prebuilt
else
  step configure 180 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVC_WERROR=OFF \
    -DKVC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native
  section configure "Configure" 25
  step build 300 cmake --build "$build" -j "$jobs" --target kvc_tests kvchat-cli
  section build "Build" 25
fi

# 4. The CUDA tests: every op on every backend, end to end on the test models (made as CTest's
#    test_models fixture makes them). On a GPU machine no CUDA case may skip.
cuda_tests() {
  "$root/tests/data/synthetic-models.sh" "$build/app/kvchat-cli" "$build/test-models" || return 1
  "$build/tests/kvc_tests" "[cuda]" -d yes 2>&1 | tee "$build/cuda-tests.log"
  local rc=${PIPESTATUS[0]}
  if grep -q "kvc-test-skipped" "$build/cuda-tests.log"; then
    echo "a CUDA test case skipped on a machine with a GPU:"
    grep -A1 "kvc-test-skipped" "$build/cuda-tests.log"
    return 1
  fi
  return "$rc"
}
if have "$build/tests/kvc_tests"; then
  step cuda-tests 240 cuda_tests
  section cuda-tests "[cuda] tests" 60
fi

# 5. Device memory bandwidth (the decode ceiling).
if command -v nvcc >/dev/null 2>&1; then
  step bandwidth-build 90 nvcc -O2 -arch="$arch" -o "$build/cuda_bandwidth" "$root/tests/cuda/bandwidth.cu" &&
    step bandwidth 60 "$build/cuda_bandwidth"
  section bandwidth "Device memory bandwidth (float4 copy, read + write bytes)" 5
fi

# 6. TinyLlama-shaped models (1.1B: dim 2048, 22 layers, 32/4 heads), CPU vs CUDA.
if have "$cli"; then
  for t in q4_0 q8_0; do
    step "mkmodel-$t" 180 "$cli" mkmodel --preset tinyllama --type "$t" --vocab-from "$vocab" \
      -o "$build/tinyllama-$t.gguf" -q
  done
  for t in q4_0 q8_0; do
    m=$build/tinyllama-$t.gguf
    have "$m" || continue
    for be in cuda cpu; do
      step "bench-$t-$be" 150 "$cli" bench -m "$m" --backend "$be" --pp 256 --tg 32 -r 2 -q
      section "bench-$t-$be" "bench $t on $be (pp256, tg32)" 12
    done
  done
  m=$build/tinyllama-q4_0.gguf
  if have "$m"; then
    for be in cuda cpu; do
      step "bench-cache-$be" 150 "$cli" bench-cache -m "$m" --backend "$be" --history 1024 --new 32 -r 2 -q
      section "bench-cache-$be" "bench-cache q4_0 on $be (history 1024, new 32)" 25
    done
  fi
fi

finish
if [ ${#failed[@]} -gt 0 ]; then
  echo "device_check: failed steps: ${failed[*]} (see $report)" >&2
  exit 1
fi
