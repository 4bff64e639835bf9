// _C.info: what this build is and which kernels it runs, for bug reports and tests.
#include "python/bindings/info.h"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "kernels/cpu/affine_microkernels.h"
#include "kernels/cpu/linear_microkernels.h"
#include "kernels/cpu/mx_microkernels.h"
#include "proto/file_header.h"

namespace pt2q::python {

void bindInfo(pybind11::module_& m) {
  m.def("cpu_isa", [] { return std::string(cpu::affineKernels().name); },
        "ISA of the CPU microkernels in use (generic, avx2, avx512); PT2Q_CPU_ISA caps it.");
  m.def("available_cpu_isas", [] {
    std::vector<std::string> out;
    for (const auto* k : cpu::availableAffineKernels()) out.emplace_back(k->name);
    return out;
  });
  m.def("mx_cpu_kernels", [] { return std::string(cpu::mxKernels().name); },
        "Kernels of the MX ops in use (generic, avx2, avx512, avx512_bf16); PT2Q_CPU_ISA caps them.");
  m.def("available_mx_cpu_kernels", [] {
    std::vector<std::string> out;
    for (const auto* k : cpu::availableMxKernels()) out.emplace_back(k->name);
    return out;
  });
  m.def("linear_cpu_kernels", [] { return std::string(cpu::linearKernels().name); },
        "Kernels of the quantized linear ops in use (generic, avx2, avx512, avx512_vnni); PT2Q_CPU_ISA caps "
        "them.");
  m.def("available_linear_cpu_kernels", [] {
    std::vector<std::string> out;
    for (const auto* k : cpu::availableLinearKernels()) out.emplace_back(k->name);
    return out;
  });
  m.def("w4_bf16_cpu_kernel", [] { return cpu::linearW4Bf16Kernel() != nullptr; },
        "Whether linear_w4a16 runs bf16 x (and fp32 x under torch's \"high\" or \"medium\" fp32 matmul "
        "precision) on the AVX512_BF16 kernel; PT2Q_CPU_ISA caps it.");
  m.def("l1_data_cache_bytes", &cpu::l1DataCacheBytes,
        "The L1 data cache size the CPU kernels size their choices by (sysconf; 32 KiB if unknown).");
  m.def("protobuf_version", &protobufVersion);
  m.def("format_version", [] { return kFormatVersion; });
  m.def("encode_file_header", [](const std::string& producer, const std::string& kind) {
    return pybind11::bytes(encodeFileHeader(FileHeader{kFormatVersion, producer, kind}));
  });
  m.def("decode_file_header", [](const std::string& bytes, const std::string& source) {
    const FileHeader h = decodeFileHeader(bytes, source);
    return pybind11::make_tuple(h.format_version, h.producer, h.payload_kind);
  });
}

}  // namespace pt2q::python
