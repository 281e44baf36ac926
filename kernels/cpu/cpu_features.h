// Which SIMD instruction sets this CPU offers, detected once at run time.
#pragma once

namespace kvc::kernels {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, avx512_vnni = 3, avx512_amx = 4 };

struct CpuFeatures {
  bool avx2 = false;         // with FMA and F16C
  bool avx512 = false;       // F, BW, VL, DQ
  bool avx512_vnni = false;  // VPDPBUSD on 512-bit registers
  bool amx_int8 = false;     // AMX tiles with int8 products, enabled by the OS for this process
};

const CpuFeatures& cpu_features();

// The best ISA this CPU supports, capped by the KVCHAT_ISA environment variable
// ("scalar", "avx2", "avx512", "avx512_vnni", "avx512_amx") so tests and benchmarks can force a path.
Isa best_isa();
const char* isa_name(Isa isa);

}  // namespace kvc::kernels
