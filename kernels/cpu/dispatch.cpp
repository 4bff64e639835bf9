// Picks the microkernel table for this CPU once per process. Every table computes identical
// results (tested in tests/kernels/affine_microkernels_test.cpp); they differ only in speed.
#include <cstdlib>
#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif
#include <cstring>
#include <stdexcept>
#include <string>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "kernels/cpu/affine_microkernels.h"
#include "kernels/cpu/linear_microkernels.h"
#include "kernels/cpu/linear_mx_microkernels.h"
#include "kernels/cpu/mx_microkernels.h"

namespace pt2q::cpu {
namespace {

bool cpuHas(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
  switch (isa) {
    case Isa::kGeneric: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return isa == Isa::kGeneric;
#endif
}

const AffineKernels& tableFor(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512) return affineKernelsAvx512();
  if (isa == Isa::kAvx2) return affineKernelsAvx2();
#endif
  return affineKernelsGeneric();
}

// PT2Q_CPU_ISA caps the ISA; unknown values are an error rather than a silent fallback.
// avx512_bf16 (the default cap) also lets the MX kernels use AVX512_BF16 and the int8 linear
// kernels AVX512_VNNI; avx512 keeps them off both.
Isa maxAllowedIsa() {
  const char* env = std::getenv("PT2Q_CPU_ISA");
  if (env == nullptr || *env == '\0') return Isa::kAvx512;
  const std::string v(env);
  if (v == "generic") return Isa::kGeneric;
  if (v == "avx2") return Isa::kAvx2;
  if (v == "avx512" || v == "avx512_bf16") return Isa::kAvx512;
  throw std::invalid_argument("PT2Q_CPU_ISA must be generic, avx2, avx512 or avx512_bf16, got '" + v + "'");
}

bool bf16Allowed() {
  const char* env = std::getenv("PT2Q_CPU_ISA");
  return env == nullptr || *env == '\0' || std::string(env) == "avx512_bf16";
}

bool cpuHasBf16() {
#if defined(__x86_64__) || defined(_M_X64)
  return cpuHas(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool cpuHasVnni() {
#if defined(__x86_64__) || defined(_M_X64)
  return cpuHas(Isa::kAvx512) && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

}  // namespace

const AffineKernels& affineKernels() {
  static const AffineKernels* chosen = [] {
    const Isa cap = maxAllowedIsa();
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
      if (static_cast<int>(isa) <= static_cast<int>(cap) && cpuHas(isa)) return &tableFor(isa);
    }
    return &tableFor(Isa::kGeneric);
  }();
  return *chosen;
}

const MxKernels& mxKernels() {
  // The same ISA as the affine kernels, so PT2Q_CPU_ISA caps both.
  static const MxKernels* chosen = [] {
    switch (affineKernels().isa) {
#if defined(__x86_64__) || defined(_M_X64)
      case Isa::kAvx512: return bf16Allowed() && cpuHasBf16() ? &mxKernelsAvx512Bf16() : &mxKernelsAvx512();
      case Isa::kAvx2: return &mxKernelsAvx2();
#endif
      default: return &mxKernelsGeneric();
    }
  }();
  return *chosen;
}

const LinearKernels& linearKernels() {
  static const LinearKernels* chosen = [] {
    switch (affineKernels().isa) {
#if defined(__x86_64__) || defined(_M_X64)
      case Isa::kAvx512: return bf16Allowed() && cpuHasVnni() ? &linearKernelsAvx512Vnni() : &linearKernelsAvx512();
      case Isa::kAvx2: return &linearKernelsAvx2();
#endif
      default: return &linearKernelsGeneric();
    }
  }();
  return *chosen;
}

bool nativeBf16Gemm() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool native = affineKernels().isa == Isa::kAvx512 && bf16Allowed() && cpuHasBf16();
  return native;
#else
  return false;
#endif
}

const LinearW4Bf16Kernels* linearW4Bf16Kernel() {
#if defined(__x86_64__) || defined(_M_X64)
  static const LinearW4Bf16Kernels* chosen = nativeBf16Gemm() ? linearW4Bf16Avx512() : nullptr;
  return chosen;
#else
  return nullptr;
#endif
}

int64_t l1DataCacheBytes() {
  static const int64_t l1 = [] {
#if defined(_SC_LEVEL1_DCACHE_SIZE)
    const long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    if (v >= (16 << 10) && v <= (1 << 20)) return static_cast<int64_t>(v);
#endif
    return int64_t{32 << 10};
  }();
  return l1;
}

bool cpuSplits512BitOps() {
#if defined(__x86_64__) || defined(_M_X64)
  // AMD family 19h with AVX-512 is Zen 4 (Zen 3, the same family, has no AVX-512). Family 1Ah
  // (Zen 5) is full width on the server parts measured; its client parts with split 512-bit
  // ops are not told apart here (not measured).
  static const bool split = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const unsigned base = (eax >> 8) & 0xF, family = base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
    return family == 0x19 && cpuHas(Isa::kAvx512);
  }();
  return split;
#else
  return false;
#endif
}

const LinearW4F32Kernels* linearW4F32Kernel() {
#if defined(__x86_64__) || defined(_M_X64)
  return affineKernels().isa == Isa::kAvx512 ? linearW4F32Avx512() : nullptr;
#else
  return nullptr;
#endif
}

const LinearMxKernels* linearMxKernels(MxUnitKind kind) {
#if defined(__x86_64__) || defined(_M_X64)
  const Isa isa = affineKernels().isa;
  if (isa == Isa::kAvx512 && (kind != MxUnitKind::kSixBit || __builtin_cpu_supports("avx512vbmi"))) {
    return linearMxKernelsAvx512();
  }
  return isa == Isa::kGeneric ? nullptr : linearMxKernelsAvx2();
#else
  (void)kind;
  return nullptr;
#endif
}

LinearMxInt8GemmFn linearMxInt8Gemm() {
#if defined(__x86_64__) || defined(_M_X64)
  return affineKernels().isa == Isa::kAvx512 && bf16Allowed() && cpuHasVnni() ? linearMxInt8GemmVnni() : nullptr;
#else
  return nullptr;
#endif
}

std::vector<const LinearKernels*> availableLinearKernels() {
  std::vector<const LinearKernels*> out{&linearKernelsGeneric()};
#if defined(__x86_64__) || defined(_M_X64)
  if (cpuHas(Isa::kAvx2)) out.push_back(&linearKernelsAvx2());
  if (cpuHas(Isa::kAvx512)) out.push_back(&linearKernelsAvx512());
  if (cpuHasVnni()) out.push_back(&linearKernelsAvx512Vnni());
#endif
  return out;
}

std::vector<const AffineKernels*> availableAffineKernels() {
  std::vector<const AffineKernels*> out;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (cpuHas(isa)) out.push_back(&tableFor(isa));
  }
  return out;
}

std::vector<const MxKernels*> availableMxKernels() {
  std::vector<const MxKernels*> out{&mxKernelsGeneric()};
#if defined(__x86_64__) || defined(_M_X64)
  if (cpuHas(Isa::kAvx2)) out.push_back(&mxKernelsAvx2());
  if (cpuHas(Isa::kAvx512)) out.push_back(&mxKernelsAvx512());
  if (cpuHasBf16()) out.push_back(&mxKernelsAvx512Bf16());
#endif
  return out;
}

}  // namespace pt2q::cpu
