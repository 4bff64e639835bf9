// .pt2q graph files as plain C++ records: encode and decode without exposing generated code
// (graph/serialize.h converts between these records and the IR).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pt2q {

struct ArgRecord {
  enum class Kind : uint8_t { kNone, kBool, kInt, kDouble, kString, kNode, kList, kTuple, kDtype, kDevice, kLayout,
                              kMemoryFormat, kSym, kOp };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;  // string, node name, dtype / device / layout / memory format / operator name, or expression
  std::vector<ArgRecord> items;
};

struct DimRecord {
  bool is_sym = false;
  int64_t size = 0;
  std::string sym;
};

struct TypeRecord {
  int kind = 0;  // ValueType::Kind
  std::string dtype;
  bool has_shape = false;
  std::vector<DimRecord> shape;
  std::string value;
};

struct NodeRecord {
  std::string name;
  int kind = 0;  // NodeKind
  std::string target;
  bool opaque = false;
  std::vector<ArgRecord> args;
  std::vector<std::pair<std::string, ArgRecord>> kwargs;
  std::vector<TypeRecord> types;
  bool tuple_output = false;
  std::vector<std::vector<std::string>> nn_module_stack;  // {key, path, type}
  std::string stack_trace;
  std::string annotation;
  std::vector<std::pair<std::string, std::string>> extra;
};

struct TensorRecord {
  std::string path;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::string data;
  bool is_parameter = false;
  bool requires_grad = false;
};

struct SubgraphRecord;

struct GraphRecord {
  std::string name;
  std::vector<NodeRecord> nodes;
  std::vector<TensorRecord> tensors;
  std::vector<SubgraphRecord> subgraphs;
};

struct SubgraphRecord {
  std::string path;
  GraphRecord graph;
};

/// The bytes of a graph file: an 8-byte magic "PT2QGRPH", then the GraphFile message.
std::string encodeGraphFile(const GraphRecord& graph, const std::string& producer);

/// Decodes a graph file. Throws std::runtime_error naming `source` for a foreign file (no
/// magic), a truncated or corrupted one, one from a newer format version, or nesting deeper than
/// protobuf's limit; never crashes on bad bytes.
GraphRecord decodeGraphFile(const std::string& bytes, const std::string& source);

}  // namespace pt2q
