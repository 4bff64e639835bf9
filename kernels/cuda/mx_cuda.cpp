// CUDA glue of the MX / BFP ops: the checks the CPU kernels share (kernels/mx/mx_args.h), then
// the torch-free kernels (mx_cuda_kernels.cu) on the current stream. Built only against a CUDA
// build of torch.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/mx_cuda_kernels.h"
#include "kernels/mx/mx_args.h"

namespace pt2q::mx {
namespace {

cuda::MxLaunch launchArgs(const MxSpec& spec, const MxShape& shape) {
  cuda::MxLaunch c;
  fillMxModes(spec, c);
  c.outer = shape.outer;
  c.len = shape.len;
  c.inner = shape.inner;
  c.block = spec.block;
  return c;
}

cuda::MxPacking packing(const CodeLayout& l) {
  cuda::MxPacking p;
  p.bits = l.bits;
  p.per_group = l.per_group;
  p.group_bytes = l.group_bytes;
  return p;
}


at::Tensor mxFakeQuantizeCuda(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                              c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                              std::optional<int64_t> seed) {
  const MxSpec spec =
      prepareMx(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed, "mx_fake_quantize");
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  if (xc.numel() == 0) return y;
  const cuda::MxLaunch c = launchArgs(spec, mxShape(xc, spec));
  cuda::checkLaunch(cuda::mxFakeQuantize(xc.const_data_ptr(), y.data_ptr(), cuda::floatTypeOf(xc.scalar_type()), c,
                                   at::cuda::getCurrentCUDAStream()),
              "mx_fake_quantize");
  return y;
}

std::tuple<at::Tensor, at::Tensor> mxQuantizeCuda(const at::Tensor& x, c10::string_view elem_format,
                                                  int64_t block_size, int64_t axis, c10::string_view rounding,
                                                  c10::string_view scale_mode, bool flush_fp32_subnorms,
                                                  std::optional<int64_t> seed) {
  const MxSpec spec = prepareMxQuantize(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed);
  const c10::cuda::CUDAGuard guard(x.device());
  const CodeLayout layout = codeLayout(spec.format);
  const at::Tensor xc = x.contiguous();
  const auto stream = at::cuda::getCurrentCUDAStream();
  if (xc.numel() > 0) {
    cuda::MxLaunch c = launchArgs(spec, mxShape(xc, spec));
    c.code_bits = layout.bits;
    c.ebits = spec.format.ebits;
    if (cuda::mxQuantizePackedApplies(xc.const_data_ptr(), cuda::floatTypeOf(xc.scalar_type()), c, packing(layout))) {
      at::Tensor codes = at::empty(codesShape(xc.sizes(), layout),
                                   xc.options().dtype(layout.packed() ? at::kByte : layout.dtype));
      at::Tensor scales = at::empty(scalesShape(xc.sizes(), spec), xc.options().dtype(at::kByte));
      cuda::checkLaunch(cuda::mxQuantizePacked(xc.const_data_ptr(), cuda::floatTypeOf(xc.scalar_type()),
                                         static_cast<uint8_t*>(codes.data_ptr()), scales.data_ptr<uint8_t>(), c,
                                         packing(layout), stream),
                  "mx_quantize");
      return {codes, scales};
    }
    // Blocks along an earlier axis: the packed column kernel (1.3-1.7x the unfused pair).
    if (layout.packed() && cuda::mxQuantizeColumnsPackedApplies(c, packing(layout), xc.size(-1))) {
      at::Tensor codes = at::empty(codesShape(xc.sizes(), layout), xc.options().dtype(at::kByte));
      at::Tensor scales = at::empty(scalesShape(xc.sizes(), spec), xc.options().dtype(at::kByte));
      cuda::checkLaunch(cuda::mxQuantizeColumnsPacked(xc.const_data_ptr(), cuda::floatTypeOf(xc.scalar_type()),
                                                      codes.data_ptr<uint8_t>(), scales.data_ptr<uint8_t>(), c,
                                                      packing(layout), xc.size(-1), stream),
                        "mx_quantize");
      return {codes, scales};
    }
  }
  at::Tensor codes = at::empty(xc.sizes(), xc.options().dtype(layout.bits > 8 ? at::kShort : at::kByte));
  at::Tensor scales = at::empty(scalesShape(xc.sizes(), spec), xc.options().dtype(at::kByte));
  if (xc.numel() > 0) {
    cuda::MxLaunch c = launchArgs(spec, mxShape(xc, spec));
    c.code_bits = layout.bits;
    c.ebits = spec.format.ebits;
    cuda::checkLaunch(cuda::mxQuantize(xc.const_data_ptr(), cuda::floatTypeOf(xc.scalar_type()), codes.data_ptr(),
                                 scales.data_ptr<uint8_t>(), c, stream),
                "mx_quantize");
  }
  if (!layout.packed()) return {codes.view(layout.dtype), scales};
  at::Tensor packed = at::empty(codesShape(xc.sizes(), layout), xc.options().dtype(at::kByte));
  const int64_t len = xc.size(-1);
  cuda::checkLaunch(cuda::mxPackCodes(codes.const_data_ptr<uint8_t>(), packed.data_ptr<uint8_t>(),
                                len == 0 ? 0 : xc.numel() / len, len, packing(layout), stream),
              "mx_quantize");
  return {packed, scales};
}

at::Tensor mxDequantizeCuda(const at::Tensor& codes, const at::Tensor& scales, c10::string_view elem_format,
                            int64_t block_size, int64_t axis, std::optional<int64_t> last_dim,
                            at::ScalarType output_dtype) {
  const MxDequantArgs a = prepareMxDequantize(codes, scales, elem_format, block_size, axis, last_dim, output_dtype);
  TORCH_CHECK_VALUE(scales.device() == codes.device(), "mx_dequantize: scales must be on the codes' device (",
                    codes.device(), "), got ", scales.device());
  const c10::cuda::CUDAGuard guard(codes.device());
  at::Tensor y = at::empty(a.sizes, codes.options().dtype(output_dtype));
  if (y.numel() == 0) return y;
  const at::Tensor cc = codes.contiguous(), sc = scales.contiguous();
  MxSpec spec;
  spec.axis = a.axis;
  spec.block = a.block;
  cuda::MxLaunch c;
  const MxShape sh = mxShape(y, spec);
  c.outer = sh.outer;
  c.len = sh.len;
  c.inner = sh.inner;
  c.block = a.block;
  c.m = a.format.stored_mbits();
  cuda::MxCodeTable table;
  const std::array<float, 256> t = codeTable(a.format, a.layout);
  std::copy(t.begin(), t.end(), table.v);
  cuda::checkLaunch(cuda::mxDequantize(cc.const_data_ptr(), sc.const_data_ptr<uint8_t>(), y.data_ptr(),
                                 cuda::floatTypeOf(output_dtype), c, packing(a.layout),
                                 a.layout.packed() ? 1 : static_cast<int>(cc.element_size()), a.sizes.back(), table,
                                 at::cuda::getCurrentCUDAStream()),
              "mx_dequantize");
  return y;
}

}  // namespace
}  // namespace pt2q::mx

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("mx_dequantize", &pt2q::mx::mxDequantizeCuda);
  m.impl("mx_fake_quantize", &pt2q::mx::mxFakeQuantizeCuda);
  m.impl("mx_quantize", &pt2q::mx::mxQuantizeCuda);
}
