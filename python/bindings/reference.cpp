// _C.reference: direct calls of the CompositeExplicitAutograd implementations, which the
// dispatcher never reaches on CPU/CUDA (the native kernels win there).
#include "python/bindings/reference.h"

#include <torch/python.h>

#include "kernels/add_q8.h"
#include "kernels/affine_ops.h"
#include "kernels/int4_pack_args.h"
#include "kernels/linear_dynamic.h"
#include "kernels/linear_mx.h"
#include "kernels/linear_static.h"
#include "kernels/linear_weight_only_args.h"
#include "kernels/lookup_q8.h"
#include "kernels/mx/mx_args.h"
#include "kernels/pool_q8.h"

namespace pt2q::python {

namespace py = pybind11;

void bindReference(py::module_& m) {
  m.def("choose_qparams_affine",
        [](const at::Tensor& x, const std::string& mapping, std::vector<int64_t> block, at::ScalarType dt,
           std::optional<int64_t> qmin, std::optional<int64_t> qmax, std::optional<double> eps,
           std::optional<at::ScalarType> sdt, std::optional<at::ScalarType> zdt, const std::string& domain) {
          return chooseQParamsAffineRef(x, mapping, block, dt, qmin, qmax, eps, sdt, zdt, domain);
        },
        py::arg("input"), py::arg("mapping_type"), py::arg("block_size"), py::arg("target_dtype"),
        py::arg("quant_min") = py::none(), py::arg("quant_max") = py::none(), py::arg("eps") = py::none(),
        py::arg("scale_dtype") = py::none(), py::arg("zero_point_dtype") = py::none(),
        py::arg("zero_point_domain") = "int");
  m.def("quantize_affine",
        [](const at::Tensor& x, std::vector<int64_t> block, const at::Tensor& s, std::optional<at::Tensor> z,
           at::ScalarType dt, std::optional<int64_t> qmin, std::optional<int64_t> qmax, const std::string& domain) {
          return quantizeAffineRef(x, block, s, z, dt, qmin, qmax, domain);
        },
        py::arg("input"), py::arg("block_size"), py::arg("scale"), py::arg("zero_point"), py::arg("output_dtype"),
        py::arg("quant_min") = py::none(), py::arg("quant_max") = py::none(), py::arg("zero_point_domain") = "int");
  m.def("dequantize_affine",
        [](const at::Tensor& q, std::vector<int64_t> block, const at::Tensor& s, std::optional<at::Tensor> z,
           at::ScalarType dt, std::optional<int64_t> qmin, std::optional<int64_t> qmax, const std::string& domain,
           at::ScalarType out) { return dequantizeAffineRef(q, block, s, z, dt, qmin, qmax, domain, out); },
        py::arg("input"), py::arg("block_size"), py::arg("scale"), py::arg("zero_point"), py::arg("input_dtype"),
        py::arg("quant_min") = py::none(), py::arg("quant_max") = py::none(), py::arg("zero_point_domain") = "int",
        py::arg("output_dtype") = at::kFloat);
  m.def("fake_quantize_affine_cachemask",
        [](const at::Tensor& x, std::vector<int64_t> block, const at::Tensor& s, std::optional<at::Tensor> z,
           at::ScalarType dt, std::optional<int64_t> qmin, std::optional<int64_t> qmax, const std::string& domain) {
          return fakeQuantizeAffineCachemaskRef(x, block, s, z, dt, qmin, qmax, domain);
        },
        py::arg("input"), py::arg("block_size"), py::arg("scale"), py::arg("zero_point"), py::arg("quant_dtype"),
        py::arg("quant_min") = py::none(), py::arg("quant_max") = py::none(), py::arg("zero_point_domain") = "int");
  m.def("mx_fake_quantize",
        [](const at::Tensor& x, const std::string& fmt, int64_t block, int64_t axis, const std::string& rounding,
           const std::string& scale_mode, bool flush, std::optional<int64_t> seed) {
          return mx::mxFakeQuantizeRef(x, fmt, block, axis, rounding, scale_mode, flush, seed);
        },
        py::arg("x"), py::arg("elem_format"), py::arg("block_size") = 32, py::arg("axis") = -1,
        py::arg("rounding") = "nearest", py::arg("scale_mode") = "floor", py::arg("flush_fp32_subnorms") = false,
        py::arg("seed") = py::none());
  m.def("mx_quantize",
        [](const at::Tensor& x, const std::string& fmt, int64_t block, int64_t axis, const std::string& rounding,
           const std::string& scale_mode, bool flush, std::optional<int64_t> seed) {
          return mx::mxQuantizeRef(x, fmt, block, axis, rounding, scale_mode, flush, seed);
        },
        py::arg("x"), py::arg("elem_format"), py::arg("block_size") = 32, py::arg("axis") = -1,
        py::arg("rounding") = "nearest", py::arg("scale_mode") = "floor", py::arg("flush_fp32_subnorms") = false,
        py::arg("seed") = py::none());
  m.def("mx_dequantize",
        [](const at::Tensor& codes, const at::Tensor& scales, const std::string& fmt, int64_t block, int64_t axis,
           std::optional<int64_t> last_dim, at::ScalarType out) {
          return mx::mxDequantizeRef(codes, scales, fmt, block, axis, last_dim, out);
        },
        py::arg("codes"), py::arg("scales"), py::arg("elem_format"), py::arg("block_size") = 32, py::arg("axis") = -1,
        py::arg("last_dim") = py::none(), py::arg("output_dtype") = at::kFloat);
  m.def("linear_mx",
        [](const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales, const std::string& fmt,
           int64_t block, const c10::optional<at::Tensor>& bias, const std::optional<std::string>& x_fmt,
           int64_t x_block, const std::string& rounding, const std::string& scale_mode, bool flush) {
          return linearMxRef(x, codes, scales, fmt, block, bias, x_fmt, x_block, rounding, scale_mode, flush);
        },
        py::arg("input"), py::arg("weight_codes"), py::arg("weight_scales"), py::arg("weight_format"),
        py::arg("block_size") = 32, py::arg("bias") = py::none(), py::arg("input_format") = py::none(),
        py::arg("input_block_size") = 32, py::arg("input_rounding") = "nearest",
        py::arg("input_scale_mode") = "floor", py::arg("input_flush_fp32_subnorms") = false);
  m.def("pack_int4", [](const at::Tensor& x, const std::string& order) { return packInt4Ref(x, order); },
        py::arg("input"), py::arg("nibble_order") = "low_first");
  m.def("unpack_int4",
        [](const at::Tensor& p, bool is_signed, const std::string& order) { return unpackInt4Ref(p, is_signed, order); },
        py::arg("packed"), py::arg("signed") = true, py::arg("nibble_order") = "low_first");
  m.def("pack_weight_int8", [](const at::Tensor& w) { return packWeightRef(w, 8); }, py::arg("weight"));
  m.def("pack_weight_int4", [](const at::Tensor& w) { return packWeightRef(w, 4); }, py::arg("weight"));
  for (const int bits : {8, 4}) {
    m.def(bits == 8 ? "linear_w8a16" : "linear_w4a16",
          [bits](const at::Tensor& x, const at::Tensor& p, const at::Tensor& s, const c10::optional<at::Tensor>& z,
                 const c10::optional<at::Tensor>& b) {
            return linearWeightOnlyRef(bits == 8 ? "linear_w8a16" : "linear_w4a16", bits, x, p, s, z, b);
          },
          py::arg("input"), py::arg("packed_weight"), py::arg("scales"), py::arg("zero_points") = py::none(),
          py::arg("bias") = py::none());
    m.def(bits == 8 ? "linear_w8a8" : "linear_w4a8",
          [bits](const at::Tensor& x, const at::Tensor& p, const at::Tensor& s, const c10::optional<at::Tensor>& z,
                 const c10::optional<at::Tensor>& b, c10::optional<double> eps) {
            return linearDynamicRef(bits == 8 ? "linear_w8a8" : "linear_w4a8", bits, x, p, s, z, b, eps);
          },
          py::arg("input"), py::arg("packed_weight"), py::arg("scales"), py::arg("zero_points") = py::none(),
          py::arg("bias") = py::none(), py::arg("per_tensor_eps") = py::none());
  }
  m.def("quantize_per_token_int8", [](const at::Tensor& x) { return quantizePerTokenRef(x); }, py::arg("input"));
  m.def(
      "linear_q8",
      [](const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
         const c10::optional<at::Tensor>& b, double so, int64_t zo, int64_t qmin, int64_t qmax) {
        return linearQ8Ref(x, sx, zx, p, s, b, Q8Output{so, zo, qmin, qmax});
      },
      py::arg("input"), py::arg("input_scale"), py::arg("input_zero_point"), py::arg("packed_weight"),
      py::arg("weight_scales"), py::arg("bias"), py::arg("output_scale"), py::arg("output_zero_point"),
      py::arg("output_quant_min") = -128, py::arg("output_quant_max") = 127);
  m.def(
      "conv2d_q8",
      [](const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
         const c10::optional<at::Tensor>& b, std::vector<int64_t> ks, std::vector<int64_t> st,
         std::vector<int64_t> pad, std::vector<int64_t> dil, double so, int64_t zo, int64_t qmin, int64_t qmax,
         int64_t groups, const c10::optional<at::Tensor>& r, double sr, int64_t zr) {
        return conv2dQ8Ref(x, sx, zx, p, s, b, ks, st, pad, dil, Q8Output{so, zo, qmin, qmax}, groups,
                           Q8Residual{r, sr, zr});
      },
      py::arg("input"), py::arg("input_scale"), py::arg("input_zero_point"), py::arg("packed_weight"),
      py::arg("weight_scales"), py::arg("bias"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding"),
      py::arg("dilation"), py::arg("output_scale"), py::arg("output_zero_point"), py::arg("output_quant_min") = -128,
      py::arg("output_quant_max") = 127, py::arg("groups") = 1, py::arg("residual") = py::none(),
      py::arg("residual_scale") = 1.0, py::arg("residual_zero_point") = 0);
  m.def(
      "linear_q8_float",
      [](const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
         const c10::optional<at::Tensor>& b) { return linearQ8FloatRef(x, sx, zx, p, s, b); },
      py::arg("input"), py::arg("input_scale"), py::arg("input_zero_point"), py::arg("packed_weight"),
      py::arg("weight_scales"), py::arg("bias"));
  m.def(
      "conv2d_q8_float",
      [](const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
         const c10::optional<at::Tensor>& b, std::vector<int64_t> ks, std::vector<int64_t> st,
         std::vector<int64_t> pad, std::vector<int64_t> dil, int64_t groups) {
        return conv2dQ8FloatRef(x, sx, zx, p, s, b, ks, st, pad, dil, groups);
      },
      py::arg("input"), py::arg("input_scale"), py::arg("input_zero_point"), py::arg("packed_weight"),
      py::arg("weight_scales"), py::arg("bias"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding"),
      py::arg("dilation"), py::arg("groups") = 1);
  m.def(
      "add_q8",
      [](const at::Tensor& a, double sa, int64_t za, const at::Tensor& b, double sb, int64_t zb, double so, int64_t zo,
         int64_t qmin, int64_t qmax) { return addQ8Ref(a, b, AddQ8Args{sa, sb, so, za, zb, zo, qmin, qmax}); },
      py::arg("a"), py::arg("a_scale"), py::arg("a_zero_point"), py::arg("b"), py::arg("b_scale"),
      py::arg("b_zero_point"), py::arg("output_scale"), py::arg("output_zero_point"), py::arg("output_quant_min") = -128,
      py::arg("output_quant_max") = 127);
  m.def(
      "mul_q8",
      [](const at::Tensor& a, double sa, int64_t za, const at::Tensor& b, double sb, int64_t zb, double so, int64_t zo,
         int64_t qmin, int64_t qmax) { return addQ8Ref(a, b, AddQ8Args{sa, sb, so, za, zb, zo, qmin, qmax, true}); },
      py::arg("a"), py::arg("a_scale"), py::arg("a_zero_point"), py::arg("b"), py::arg("b_scale"),
      py::arg("b_zero_point"), py::arg("output_scale"), py::arg("output_zero_point"), py::arg("output_quant_min") = -128,
      py::arg("output_quant_max") = 127);
  m.def(
      "max_pool2d_q8",
      [](const at::Tensor& x, std::vector<int64_t> ks, std::vector<int64_t> st, std::vector<int64_t> pad,
         std::vector<int64_t> dil, bool ceil_mode) { return maxPoolQ8Ref(x, ks, st, pad, dil, ceil_mode); },
      py::arg("input"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding") = std::vector<int64_t>{0},
      py::arg("dilation") = std::vector<int64_t>{1}, py::arg("ceil_mode") = false);
  m.def("lookup_q8", &lookupQ8Ref, py::arg("codes"), py::arg("table"));
}

}  // namespace pt2q::python
