// Byte transposes in 16 x 16 tiles: SSE2 (baseline on x86-64) unpacks of 8, 16, 32 and 64 bits
// turn 16 rows into 16 columns in 64 instructions; ragged edges go byte by byte.
#include "kernels/cpu/channels_last_bytes.h"

#include <ATen/Parallel.h>

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pt2q::cpu {
namespace {

constexpr int64_t kTile = 16;

#if defined(__SSE2__)
// dst[j * dst_stride + i] = src[i * src_stride + j] ^ flip for i, j < 16.
inline void tile16(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride, __m128i flip) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i) {
    a[i] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * src_stride)), flip);
  }
  // 8 bits: b[2k] = columns 0-7 of rows 2k, 2k+1 interleaved, b[2k+1] columns 8-15.
  for (int k = 0; k < 8; ++k) {
    b[2 * k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]);
    b[2 * k + 1] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
  }
  // 16 bits: a[4m + q] = columns 4q..4q+3 of rows 4m..4m+3.
  for (int m = 0; m < 4; ++m) {
    a[4 * m + 0] = _mm_unpacklo_epi16(b[4 * m + 0], b[4 * m + 2]);
    a[4 * m + 1] = _mm_unpackhi_epi16(b[4 * m + 0], b[4 * m + 2]);
    a[4 * m + 2] = _mm_unpacklo_epi16(b[4 * m + 1], b[4 * m + 3]);
    a[4 * m + 3] = _mm_unpackhi_epi16(b[4 * m + 1], b[4 * m + 3]);
  }
  // 32 bits: b[8p + 2q + s] = columns 4q + 2s, 4q + 2s + 1 of rows 8p..8p+7.
  for (int p = 0; p < 2; ++p) {
    for (int q = 0; q < 4; ++q) {
      b[8 * p + 2 * q] = _mm_unpacklo_epi32(a[8 * p + q], a[8 * p + 4 + q]);
      b[8 * p + 2 * q + 1] = _mm_unpackhi_epi32(a[8 * p + q], a[8 * p + 4 + q]);
    }
  }
  // 64 bits: column 2e and 2e + 1, all 16 rows.
  for (int e = 0; e < 8; ++e) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * e) * dst_stride), _mm_unpacklo_epi64(b[e], b[8 + e]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * e + 1) * dst_stride), _mm_unpackhi_epi64(b[e], b[8 + e]));
  }
}
#endif

// The rectangle [r0, r1) x [c0, c1) of dst [cols, rows] = src [rows, cols] ^ flip: whole 16 x 16
// tiles from (r0, c0), the ragged edges byte by byte.
void transposeRect(const uint8_t* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                   uint8_t flip, uint8_t* dst) {
  int64_t rt = r0, ct = c0;  // ends of the tiled part
#if defined(__SSE2__)
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  rt = r0 + (r1 - r0) / kTile * kTile, ct = c0 + (c1 - c0) / kTile * kTile;
  for (int64_t r = r0; r < rt; r += kTile) {
    for (int64_t c = c0; c < ct; c += kTile) tile16(src + r * cols + c, cols, dst + c * rows + r, rows, f);
  }
#endif
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t r = c < ct ? rt : r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c] ^ flip;
  }
}

// dst [cols, rows] = src [rows, cols] ^ flip, for `images` such pairs one after another. Tasks
// take bands of 16 rows, or, with few rows (NCHW -> NHWC of 32 channels: 2 bands), ranges of 256
// columns: with one band per thread, each 64-byte line of dst was written half by one thread and
// half by the other (the input copy ran no faster than ATen's).
void transposeBytes(const uint8_t* src, int64_t images, int64_t rows, int64_t cols, uint8_t flip, uint8_t* dst) {
  const int64_t bands = (rows + kTile - 1) / kTile;
  if (bands >= 4 * at::get_num_threads() || cols <= 256) {
    at::parallel_for(0, images * bands, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t img = b / bands, r0 = (b % bands) * kTile;
        transposeRect(src + img * rows * cols, rows, cols, r0, std::min(rows, r0 + kTile), 0, cols, flip,
                      dst + img * rows * cols);
      }
    });
    return;
  }
  constexpr int64_t kCols = 256;
  const int64_t spans = (cols + kCols - 1) / kCols;
  at::parallel_for(0, images * spans, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t img = s / spans, c0 = (s % spans) * kCols;
      transposeRect(src + img * rows * cols, rows, cols, 0, rows, c0, std::min(cols, c0 + kCols), flip,
                    dst + img * rows * cols);
    }
  });
}

}  // namespace

at::Tensor channelsLastBytes(const at::Tensor& input, at::ScalarType dtype, uint8_t flip) {
  const at::Tensor nhwc = input.permute({0, 2, 3, 1});
  if (!input.is_contiguous() || input.numel() == 0) {
    // Channels-last (no transpose) or strided: ATen's elementwise pass, then its copy.
    const at::Tensor b = nhwc.view(at::kByte);
    return (flip != 0 ? b.bitwise_xor(flip) : b).contiguous().view(dtype);
  }
  at::Tensor out = at::empty(nhwc.sizes(), input.options().dtype(dtype));
  transposeBytes(reinterpret_cast<const uint8_t*>(input.const_data_ptr()), input.size(0), input.size(1),
                 input.size(2) * input.size(3), flip, reinterpret_cast<uint8_t*>(out.data_ptr()));
  return out;
}

at::Tensor nchwFromChannelsLast(const at::Tensor& nhwc) {
  TORCH_INTERNAL_ASSERT(nhwc.is_contiguous() && nhwc.dim() == 4 && nhwc.element_size() == 1);
  at::Tensor out = at::empty({nhwc.size(0), nhwc.size(3), nhwc.size(1), nhwc.size(2)}, nhwc.options());
  if (out.numel() > 0) {
    transposeBytes(reinterpret_cast<const uint8_t*>(nhwc.const_data_ptr()), nhwc.size(0),
                   nhwc.size(1) * nhwc.size(2), nhwc.size(3), 0, reinterpret_cast<uint8_t*>(out.data_ptr()));
  }
  return out;
}

}  // namespace pt2q::cpu
