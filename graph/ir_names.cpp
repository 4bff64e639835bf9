// Names of dtypes, layouts and memory formats in the IR text form (see ir_text.h).
#include "graph/ir_text.h"

namespace pt2q {
namespace {

template <typename T>
struct Named {
  T value;
  const char* name;
};

// Each dtype's short name (types: f32[2, 3]) and torch's name (arguments: torch.float32).
struct DtypeNames {
  c10::ScalarType value;
  const char* short_name;
  const char* torch_name;
};

constexpr DtypeNames kDtypes[] = {
    {c10::kFloat, "f32", "float32"},
    {c10::kDouble, "f64", "float64"},
    {c10::kHalf, "f16", "float16"},
    {c10::kBFloat16, "bf16", "bfloat16"},
    {c10::kByte, "u8", "uint8"},
    {c10::kChar, "i8", "int8"},
    {c10::kShort, "i16", "int16"},
    {c10::kInt, "i32", "int32"},
    {c10::kLong, "i64", "int64"},
    {c10::kBool, "b8", "bool"},
    {c10::kUInt16, "u16", "uint16"},
    {c10::kUInt32, "u32", "uint32"},
    {c10::kUInt64, "u64", "uint64"},
    {c10::kComplexHalf, "c32", "complex32"},
    {c10::kComplexFloat, "c64", "complex64"},
    {c10::kComplexDouble, "c128", "complex128"},
    {c10::kFloat8_e4m3fn, "f8e4m3", "float8_e4m3fn"},
    {c10::kFloat8_e5m2, "f8e5m2", "float8_e5m2"},
    {c10::kFloat8_e4m3fnuz, "f8e4m3fnuz", "float8_e4m3fnuz"},
    {c10::kFloat8_e5m2fnuz, "f8e5m2fnuz", "float8_e5m2fnuz"},
    {c10::ScalarType::Float8_e8m0fnu, "f8e8m0", "float8_e8m0fnu"},
    {c10::ScalarType::Float4_e2m1fn_x2, "f4e2m1x2", "float4_e2m1fn_x2"},
    {c10::kQInt8, "qi8", "qint8"},
    {c10::kQUInt8, "qu8", "quint8"},
    {c10::kQInt32, "qi32", "qint32"},
    {c10::ScalarType::UInt1, "u1", "uint1"},
    {c10::ScalarType::UInt2, "u2", "uint2"},
    {c10::ScalarType::UInt3, "u3", "uint3"},
    {c10::ScalarType::UInt4, "u4", "uint4"},
    {c10::ScalarType::UInt5, "u5", "uint5"},
    {c10::ScalarType::UInt6, "u6", "uint6"},
    {c10::ScalarType::UInt7, "u7", "uint7"},
    {c10::ScalarType::Int1, "i1", "int1"},
    {c10::ScalarType::Int2, "i2", "int2"},
    {c10::ScalarType::Int3, "i3", "int3"},
    {c10::ScalarType::Int4, "i4", "int4"},
    {c10::ScalarType::Int5, "i5", "int5"},
    {c10::ScalarType::Int6, "i6", "int6"},
    {c10::ScalarType::Int7, "i7", "int7"},
};

constexpr Named<c10::Layout> kLayouts[] = {
    {c10::kStrided, "strided"}, {c10::kSparse, "sparse_coo"}, {c10::kSparseCsr, "sparse_csr"},
    {c10::kSparseCsc, "sparse_csc"}, {c10::kSparseBsr, "sparse_bsr"}, {c10::kSparseBsc, "sparse_bsc"},
    {c10::kMkldnn, "_mkldnn"}, {c10::kJagged, "jagged"},
};

constexpr Named<c10::MemoryFormat> kMemoryFormats[] = {
    {c10::MemoryFormat::Contiguous, "contiguous_format"}, {c10::MemoryFormat::Preserve, "preserve_format"},
    {c10::MemoryFormat::ChannelsLast, "channels_last"}, {c10::MemoryFormat::ChannelsLast3d, "channels_last_3d"},
};

template <typename T, size_t N>
const char* nameOf(const Named<T> (&table)[N], T v, const char* fallback) {
  for (const auto& e : table) {
    if (e.value == v) return e.name;
  }
  return fallback;
}

template <typename T, size_t N>
std::optional<T> valueOf(const Named<T> (&table)[N], std::string_view name) {
  for (const auto& e : table) {
    if (name == e.name) return e.value;
  }
  return std::nullopt;
}

}  // namespace

const char* dtypeShortName(c10::ScalarType t) {
  for (const auto& d : kDtypes) {
    if (d.value == t) return d.short_name;
  }
  return c10::toString(t);
}

const char* dtypeTorchName(c10::ScalarType t) {
  for (const auto& d : kDtypes) {
    if (d.value == t) return d.torch_name;
  }
  return c10::toString(t);
}

std::optional<c10::ScalarType> dtypeFromShortName(std::string_view n) {
  for (const auto& d : kDtypes) {
    if (n == d.short_name) return d.value;
  }
  return std::nullopt;
}

std::optional<c10::ScalarType> dtypeFromTorchName(std::string_view n) {
  for (const auto& d : kDtypes) {
    if (n == d.torch_name) return d.value;
  }
  return std::nullopt;
}
const char* layoutName(c10::Layout l) { return nameOf(kLayouts, l, "strided"); }
std::optional<c10::Layout> layoutFromName(std::string_view n) { return valueOf(kLayouts, n); }
const char* memoryFormatName(c10::MemoryFormat m) { return nameOf(kMemoryFormats, m, "contiguous_format"); }
std::optional<c10::MemoryFormat> memoryFormatFromName(std::string_view n) { return valueOf(kMemoryFormats, n); }

}  // namespace pt2q
