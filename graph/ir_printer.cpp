// Printing the IR text form (grammar in docs/ir_text.md).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "graph/ir_text.h"

namespace pt2q {
namespace {

bool isIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string printDouble(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", d);
  // The shortest of %.{1..17}g that reads back to the same bits, so 0.1 prints as 0.1.
  for (int p = 1; p <= 17; ++p) {
    char b2[40];
    std::snprintf(b2, sizeof(b2), "%.*g", p, d);
    if (std::strtod(b2, nullptr) == d) {
      std::snprintf(buf, sizeof(buf), "%s", b2);
      break;
    }
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // a float stays a float
  if (d == 0.0 && std::signbit(d) && s[0] != '-') s = "-" + s;
  return s;
}

std::string printDim(const Dim& d) {
  if (std::holds_alternative<int64_t>(d)) return std::to_string(std::get<int64_t>(d));
  const std::string& e = std::get<SymExpr>(d).expr;
  return isIdentifier(e) ? e : quote(e);
}

std::string printType(const ValueType& t) {
  switch (t.kind) {
    case ValueType::Kind::kSymInt: return t.value ? "sym(" + quote(t.value->expr) + ")" : "sym";
    case ValueType::Kind::kSymFloat: return t.value ? "symfloat(" + quote(t.value->expr) + ")" : "symfloat";
    case ValueType::Kind::kSymBool: return t.value ? "symbool(" + quote(t.value->expr) + ")" : "symbool";
    case ValueType::Kind::kTensor: break;
  }
  std::string out = t.dtype ? dtypeShortName(*t.dtype) : "tensor";
  if (t.shape) {
    out += "[";
    for (size_t i = 0; i < t.shape->size(); ++i) out += (i ? ", " : "") + printDim((*t.shape)[i]);
    out += "]";
  }
  return out;
}

std::string printTypes(const NodeMeta& m) {
  if (m.types.empty()) return "";
  std::string out = " : ";
  if (!m.tuple_output) return out + printType(m.types[0]);
  out += "(";
  for (size_t i = 0; i < m.types.size(); ++i) out += (i ? ", " : "") + printType(m.types[i]);
  return out + (m.types.size() == 1 ? ",)" : ")");
}

std::string printMeta(const NodeMeta& m) {
  std::vector<std::string> items;
  if (!m.nn_module_stack.empty()) {
    std::string s = "nn_module_stack = [";
    for (size_t i = 0; i < m.nn_module_stack.size(); ++i) {
      const ModuleFrame& f = m.nn_module_stack[i];
      s += (i ? ", (" : "(") + quote(f.key) + ", " + quote(f.path) + ", " + quote(f.type) + ")";
    }
    items.push_back(s + "]");
  }
  if (!m.stack_trace.empty()) items.push_back("stack_trace = " + quote(m.stack_trace));
  if (!m.annotation.empty()) items.push_back("annotation = " + quote(m.annotation));
  for (const auto& kv : m.extra) items.push_back(quote(kv.first) + " = " + quote(kv.second));
  if (items.empty()) return "";
  std::string out = " {";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "}";
}

std::string printCall(const Node& n) {
  std::string out = "(";
  bool first = true;
  for (const Argument& a : n.args()) {
    out += (first ? "" : ", ") + printArgument(a);
    first = false;
  }
  for (const auto& kv : n.kwargs()) {
    out += (first ? "" : ", ") + kv.first + "=" + printArgument(kv.second);
    first = false;
  }
  return out + ")";
}

std::string printParam(const Node& n) {
  std::string out = "%" + n.name() + (n.meta().types.empty() ? "" : ":" + printTypes(n.meta()).substr(2));
  if (!n.args().empty()) out += " = " + printArgument(n.args()[0]);
  return out + printMeta(n.meta());
}

}  // namespace

std::string printArgument(const Argument& a) {
  if (a.isNone()) return "none";
  if (a.is<bool>()) return a.as<bool>() ? "true" : "false";
  if (a.is<int64_t>()) return std::to_string(a.as<int64_t>());
  if (a.is<double>()) return printDouble(a.as<double>());
  if (a.is<std::string>()) return quote(a.as<std::string>());
  if (a.isNode()) return "%" + a.node()->name();
  if (a.is<ArgList>() || a.is<ArgTuple>()) {
    const bool list = a.is<ArgList>();
    const auto& items = list ? a.as<ArgList>().items : a.as<ArgTuple>().items;
    std::string out = list ? "[" : "(";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + printArgument(items[i]);
    if (!list && items.size() == 1) out += ",";
    return out + (list ? "]" : ")");
  }
  if (a.is<c10::ScalarType>()) return std::string("torch.") + dtypeTorchName(a.as<c10::ScalarType>());
  if (a.is<c10::Device>()) return "torch.device(" + quote(a.as<c10::Device>().str()) + ")";
  if (a.is<c10::Layout>()) return std::string("torch.") + layoutName(a.as<c10::Layout>());
  if (a.is<c10::MemoryFormat>()) return std::string("torch.") + memoryFormatName(a.as<c10::MemoryFormat>());
  if (a.is<OpRef>()) return "op(" + quote(a.as<OpRef>().name) + ")";
  return "sym(" + quote(a.as<SymExpr>().expr) + ")";
}

std::string printNode(const Node& n) {
  const std::string types = printTypes(n.meta());
  const std::string meta = printMeta(n.meta());
  switch (n.kind()) {
    case NodeKind::kPlaceholder: return "placeholder " + printParam(n);
    case NodeKind::kOutput: return "return " + printArgument(n.args().empty() ? Argument() : n.args()[0]) + meta;
    case NodeKind::kGetAttr: return "%" + n.name() + " = get_attr " + quote(n.target()) + types + meta;
    case NodeKind::kCallModule:
      return "%" + n.name() + " = call_module " + quote(n.target()) + printCall(n) + types + meta;
    case NodeKind::kCallFunction: {
      const std::string callee = n.isOpaque() ? "call_opaque " + quote(n.target()) : n.target();
      return "%" + n.name() + " = " + callee + printCall(n) + types + meta;
    }
  }
  return "";
}

namespace {

std::string printOne(const Graph& graph, const std::string& name);

// Subgraphs follow their parent, named by their full path from the main graph.
void printSubgraphs(const Graph& graph, const std::string& prefix, std::string& out) {
  for (const auto& [path, sub] : graph.subgraphs()) {
    const std::string full = prefix.empty() ? path : prefix + "." + path;
    out += "\n" + printOne(*sub, full);
    printSubgraphs(*sub, full, out);
  }
}

}  // namespace

std::vector<std::pair<std::string, int>> splitTestCases(std::string_view text) {
  std::vector<std::pair<std::string, int>> out{{"", 1}};
  int line_no = 0;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    const std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (line.substr(0, 7) == "# -----") {
      out.push_back({"", line_no + 1});
    } else {
      out.back().first.append(line).append("\n");
    }
  }
  return out;
}

std::string printGraph(const Graph& graph) {
  std::string out = printOne(graph, graph.name());
  printSubgraphs(graph, "", out);
  return out;
}

namespace {

std::string printOne(const Graph& graph, const std::string& name) {
  std::string out = "graph @" + name + "(";
  const std::vector<Node*> ps = graph.placeholders();
  for (size_t i = 0; i < ps.size(); ++i) out += (i ? ", " : "") + printParam(*ps[i]);
  out += "):\n";
  for (const Node* n : graph.nodes()) {
    if (n->kind() != NodeKind::kPlaceholder) out += "  " + printNode(*n) + "\n";
  }
  return out;
}

}  // namespace

}  // namespace pt2q
