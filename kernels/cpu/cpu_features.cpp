// Run-time CPU feature detection through the compiler's cpuid builtins.
#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kvc::kernels {

namespace {

#if defined(__x86_64__)
// AMX with int8 products, usable by this process: the CPU has the tiles (CPUID leaf 7: EDX bits
// 24, AMX-TILE, and 25, AMX-INT8), the OS saves their state (XCR0 bits 17 and 18), and Linux
// grants the process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, since 5.16), without which
// the first tile instruction faults.
bool detect_amx_int8() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;  // OSXSAVE
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  if ((d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long k_arch_req_xcomp_perm = 0x1023;
  constexpr long k_xfeature_xtiledata = 18;
  return syscall(SYS_arch_prctl, k_arch_req_xcomp_perm, k_xfeature_xtiledata) == 0;
}
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures r;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    r.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    r.avx512 = r.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    r.avx512_vnni = r.avx512 && __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__x86_64__)
    r.amx_int8 = r.avx512_vnni && detect_amx_int8();
#endif
    return r;
  }();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_vnni: return "avx512_vnni";
    case Isa::avx512_amx: return "avx512_amx";
  }
  return "?";
}

Isa best_isa() {
  static const Isa isa = [] {
    const CpuFeatures& f = cpu_features();
    Isa best = f.amx_int8      ? Isa::avx512_amx
               : f.avx512_vnni ? Isa::avx512_vnni
               : f.avx512      ? Isa::avx512
               : f.avx2        ? Isa::avx2
                               : Isa::scalar;
    if (const char* cap = std::getenv("KVCHAT_ISA")) {
      for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_vnni, Isa::avx512_amx}) {
        if (std::strcmp(cap, isa_name(i)) == 0 && i < best) best = i;
      }
    }
    return best;
  }();
  return isa;
}

}  // namespace kvc::kernels
