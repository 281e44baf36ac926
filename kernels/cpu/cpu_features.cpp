// Run-time CPU feature detection through the compiler's cpuid builtins.
#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace kvc::kernels {

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
  }
  return "?";
}

Isa best_isa() {
  static const Isa isa = [] {
    const CpuFeatures& f = cpu_features();
    Isa best = f.avx512_vnni ? Isa::avx512_vnni : f.avx512 ? Isa::avx512 : f.avx2 ? Isa::avx2 : Isa::scalar;
    if (const char* cap = std::getenv("KVCHAT_ISA")) {
      for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_vnni}) {
        if (std::strcmp(cap, isa_name(i)) == 0 && i < best) best = i;
      }
    }
    return best;
  }();
  return isa;
}

}  // namespace kvc::kernels
