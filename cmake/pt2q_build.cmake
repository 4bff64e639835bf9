# Build conveniences shared by every folder: ccache, warnings, per-ISA compile flags.
find_program(PT2Q_CCACHE ccache)
if(PT2Q_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${PT2Q_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${PT2Q_CCACHE})
endif()

set(PT2Q_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)

# Flags for the per-ISA microkernel files; the dispatcher picks one at run time, so only
# those files are compiled with them (see kernels/cpu/dispatch.cpp).
set(PT2Q_AVX2_FLAGS -mavx2 -mfma -mf16c)
# GCC 12 flags its own _mm512_undefined_ps() inside the intrinsics as maybe-uninitialized.
set(PT2Q_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c -Wno-maybe-uninitialized)
