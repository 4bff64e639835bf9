// Hopper's warpgroup matrix multiply (wgmma, sm_90a only): shared-memory operand descriptors,
// the async fences, the s8 x s8 -> s32 instructions that linear_dynamic_wgmma_kernels.cu issues
// and the bf16 / fp16 ones with A in registers of linear_woq_wgmma_kernels.cu. Compile only for sm_90a (the callers guard on
// __CUDA_ARCH_FEAT_SM90_ALL).
//
// Operands come in by the tensor copy engine (cp.async.bulk.tensor, completing on mbarriers):
// its writes and wgmma's reads are both in the async proxy, so no proxy fence sits between them
// (cp.async writes are generic-proxy writes and would need fence.proxy.async, which on the H100
// also waited for every copy still in flight: a first cp.async version ran at 344 T op/s).
//
// Operands are K-major tiles of rows of 128 bytes (128 int8 k values) in the 128-byte swizzle:
// 16-byte slot c of row r is stored at r * 128 + ((c ^ (r % 8)) * 16), tiles 1024-byte aligned.
// One descriptor addresses 8-row groups 1024 bytes apart (the stride byte offset); a k32 step
// inside the 128 bytes is the start address plus 32 bytes (the swizzle is applied to the address
// bits by the hardware, so the offset is of the unswizzled row).
#pragma once

#include <cstdint>

namespace pt2q::cuda::wgmma {

constexpr int kRowBytes = 128;  // one swizzled row: 128 int8 k values
constexpr int kAtomBytes = 8 * kRowBytes;

// The 16-byte slot of (row, slot c) in a swizzled tile.
__device__ __forceinline__ int swizzled(int row, int c) { return row * kRowBytes + ((c ^ (row & 7)) << 4); }

// Descriptor bits: start address >> 4 (0-13), leading byte offset >> 4 (16-29; unused for swizzled
// K-major tiles, 1 by convention), stride byte offset >> 4 (32-45), layout 1 = 128-byte swizzle
// (62-63).
__device__ __forceinline__ uint64_t descriptor(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) |
         (static_cast<uint64_t>(kAtomBytes >> 4) << 32) | (uint64_t(1) << 62);
}

// Before the first wgmma of a batch: orders the accumulator registers' earlier accesses.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across an asynchronous wgmma.
template <int N>
__device__ __forceinline__ void pin(int (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// mbarriers in shared memory: the tensor-copy pipeline's "stage full" (the copy engine's byte
// count) and "stage empty" (the consumers' arrivals) signals.
__device__ __forceinline__ uint32_t smemAddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void barrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smemAddr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void barrierInitFence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smemAddr(bar)) : "memory");
}
// `on` false: the thread takes no part (a predicate inside the instruction, so that a warp can
// run it without a branch that diverges; see copyBox2d).
__device__ __forceinline__ void arriveExpectBytes(uint64_t* bar, uint32_t bytes, bool on = true) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n}\n" ::"r"(
          smemAddr(bar)),
      "r"(bytes), "r"(static_cast<uint32_t>(on))
      : "memory");
}
__device__ __forceinline__ void waitParity(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smemAddr(bar)),
      "r"(parity)
      : "memory");
}
// Whether `p` holds for all THREADS threads (a multiple of 32) that meet at named barrier ID
// (1-15; 0 is __syncthreads'): a vote that also synchronizes them.
template <int ID, int THREADS = 128>
__device__ __forceinline__ bool allOf(bool p) {
  uint32_t r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.and.pred q, %2, %3, p;\nselp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(static_cast<uint32_t>(p)), "n"(ID), "n"(THREADS)
      : "memory");
  return r != 0;
}
// A box of a tensor map (kernel parameter) into shared memory, completing on bar's byte count; by
// the threads with `on` true. A whole warp may run it with one lane on: ptxas serializes every
// wgmma of a kernel (C7513) where a branch that diverges sits inside their pipeline.
__device__ __forceinline__ void copyBox2d(void* dst, const void* map, int c0, int c1, uint64_t* bar, bool on = true) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"
      "@p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n}\n" ::
          "r"(smemAddr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smemAddr(bar)), "r"(static_cast<uint32_t>(on))
      : "memory");
}

// D (+)= A B over k32, A and B in shared memory (descriptors), 64 int32 accumulators per thread.
__device__ __forceinline__ void wgmmaS8N128(int (&d)[64], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p;\n}\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
        "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
        "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
        "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
        "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
        "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
        "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
        "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
      : "l"(a), "l"(b), "r"(accumulate));
}

// D (+)= A B over k32, A and B in shared memory (descriptors), 128 int32 accumulators per thread.
__device__ __forceinline__ void wgmmaS8N256(int (&d)[128], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p;\n}\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
        "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
        "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
        "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
        "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
        "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
        "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
        "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]),
        "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]),
        "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]),
        "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]),
        "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]),
        "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]),
        "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]),
        "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]),
        "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
      : "l"(a), "l"(b), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void pin(uint32_t (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (+)= A B over k16 for 16-bit floats (F16: fp16, else bf16), fp32 accumulators: A from
// registers (the mma.sync m16n8k16 A fragment of each warp's 16 of the 64 rows), B (K-major,
// 128 columns) in shared memory. A's registers must stay unchanged until the wgmma is waited for.
template <bool F16>
__device__ __forceinline__ void wgmmaF16RegN128(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  // The two forms differ only in the operands' type name.
#define PT2Q_WGMMA_F16_REG_N128(TYPE)                                                                        \
  asm volatile(                                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                          \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                                     \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                              \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                    \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                    \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                      \
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"                                                      \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),     \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  if constexpr (F16) {
    PT2Q_WGMMA_F16_REG_N128("f16")
  } else {
    PT2Q_WGMMA_F16_REG_N128("bf16")
  }
#undef PT2Q_WGMMA_F16_REG_N128
}

// One k16 step of a GEMM whose A comes from registers double-buffered in fa (the weight-only and
// MX GEMMs): the wgmma of fa[kk % 2] on B descriptor d, then the wait for the previous step's, whose
// A registers may be rewritten after this. The pins keep the compiler from moving accumulator
// accesses across the asynchronous wgmma, and the previous A registers live (unreused) until it is
// done.
template <bool F16>
__device__ __forceinline__ void stepRegA(float (&acc)[64], uint32_t (&fa)[2][4], int kk, uint64_t d) {
  pin(acc);
  fence();
  wgmmaF16RegN128<F16>(acc, fa[kk % 2], d, 1);
  commit();
  wait<1>();
  pin(acc);
  pin(fa[(kk + 1) % 2]);
}

// Every wgmma of the warpgroup done: the accumulators and both A buffers are free.
__device__ __forceinline__ void drainRegA(float (&acc)[64], uint32_t (&fa)[2][4]) {
  wait<0>();
  pin(acc);
  pin(fa[0]);
  pin(fa[1]);
}

// A warpgroup's m64n128 accumulators into part[row of x][weight row] (STRIDE floats a row of x;
// warpgroup wg's 64 weight rows from 64 wg): accumulator 4i + 2h + j of lane (g, t) of warp `warp`
// is weight row 16 warp + g + 8h, row of x 8i + 2t + j.
template <int STRIDE>
__device__ __forceinline__ void stageSums(float* part, const float (&acc)[64], int wg, int warp, int g, int t) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      part[(8 * i + 2 * t + (e & 1)) * STRIDE + wg * 64 + warp * 16 + g + 8 * (e >> 1)] = acc[4 * i + e];
    }
  }
}

}  // namespace pt2q::cuda::wgmma
