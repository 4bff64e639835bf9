// Printing and parsing of annotations (quantizers/annotation.h).
#include "quantizers/annotation.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <cstdlib>
#include <tuple>

namespace pt2q {

std::optional<std::string> QSpecRef::attr(const std::string& name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return v;
  }
  return std::nullopt;
}

namespace {

std::string printRef(const QSpecRef& r) {
  switch (r.kind) {
    case QSpecRef::Kind::kNone: return "none";
    case QSpecRef::Kind::kShared:
      return "shared(%" + r.shared.node + (r.shared.isEdge() ? ", %" + r.shared.user : "") + ")";
    case QSpecRef::Kind::kSpec: {
      std::string s = "spec#" + std::to_string(r.id) + "{";
      for (size_t i = 0; i < r.attrs.size(); ++i) s += (i ? ", " : "") + r.attrs[i].first + "=" + r.attrs[i].second;
      return s + "}";
    }
  }
  return "?";
}

struct Parser {
  const std::string& s;
  const std::string& node;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& what) const {
    TORCH_CHECK(false, "annotation of node %", node, ": expected ", what, " at column ", i + 1, " of \"", s, "\"");
  }
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(const std::string& t) {
    ws();
    if (s.compare(i, t.size(), t) == 0) {
      i += t.size();
      return true;
    }
    return false;
  }
  void expect(const std::string& t) {
    if (!eat(t)) fail("'" + t + "'");
  }
  std::string ident() {
    ws();
    const size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.')) ++i;
    if (i == b) fail("a name");
    return s.substr(b, i - b);
  }
  std::string nodeName() {
    expect("%");
    return ident();
  }
  // A Python repr up to the next ',' or '}' outside brackets (e.g. "torch.int8", "-128", "None").
  std::string value() {
    ws();
    const size_t b = i;
    int depth = 0;
    while (i < s.size() && !(depth == 0 && (s[i] == ',' || s[i] == '}'))) {
      depth += (s[i] == '(' || s[i] == '[') - (s[i] == ')' || s[i] == ']');
      ++i;
    }
    size_t e = i;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    if (e == b) fail("a value");
    return s.substr(b, e - b);
  }
  QSpecRef ref() {
    QSpecRef r;
    if (eat("none")) return r;
    if (eat("shared")) {
      r.kind = QSpecRef::Kind::kShared;
      expect("(");
      r.shared.node = nodeName();
      if (eat(",")) r.shared.user = nodeName();
      expect(")");
      return r;
    }
    if (!eat("spec#")) fail("none, shared(...) or spec#N{...}");
    r.kind = QSpecRef::Kind::kSpec;
    ws();
    char* end = nullptr;
    r.id = std::strtoll(s.c_str() + i, &end, 10);
    if (end == s.c_str() + i) fail("a spec id");
    i = static_cast<size_t>(end - s.c_str());
    expect("{");
    if (!eat("}")) {
      do {
        std::string k = ident();
        expect("=");
        r.attrs.emplace_back(std::move(k), value());
      } while (eat(","));
      expect("}");
    }
    return r;
  }
};

bool sameValue(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char* ea = nullptr;
  char* eb = nullptr;
  const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  const bool na = ea != a.c_str() && *ea == '\0', nb = eb != b.c_str() && *eb == '\0';
  return na && nb && x == y;  // 1 == 1.0 in Python
}

}  // namespace

std::string printAnnotation(const Annotation& a) {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  for (const auto& [arg, r] : a.inputs) add("in %" + arg + " = " + printRef(r));
  if (a.output.kind != QSpecRef::Kind::kNone) add("out = " + printRef(a.output));
  if (!a.allow_implicit_sharing) add("implicit_sharing = false");
  if (a.annotated) add("annotated");
  if (a.quantized_output) add("quantized_output");
  return s;
}

Annotation parseAnnotation(const std::string& text, const std::string& node) {
  Annotation a;
  Parser p{text, node};
  p.ws();
  if (p.i == text.size()) return a;
  do {
    if (p.eat("in")) {
      std::string arg = p.nodeName();
      p.expect("=");
      a.inputs.emplace_back(std::move(arg), p.ref());
    } else if (p.eat("out")) {
      p.expect("=");
      a.output = p.ref();
    } else if (p.eat("implicit_sharing")) {
      p.expect("=");
      if (p.eat("true")) {
        a.allow_implicit_sharing = true;
      } else if (p.eat("false")) {
        a.allow_implicit_sharing = false;
      } else {
        p.fail("true or false");
      }
    } else if (p.eat("annotated")) {
      a.annotated = true;
    } else if (p.eat("quantized_output")) {
      a.quantized_output = true;
    } else {
      p.fail("'in', 'out', 'implicit_sharing', 'annotated' or 'quantized_output'");
    }
  } while (p.eat(";"));
  p.ws();
  if (p.i != text.size()) p.fail("';' or the end");
  return a;
}

Annotation annotationOf(const Node* n) { return parseAnnotation(n->meta().annotation, n->name()); }

void setAnnotation(Node* n, const Annotation& a) { n->meta().annotation = printAnnotation(a); }

bool sameQuantizationAttrs(const QSpecRef& a, const QSpecRef& b) {
  // torchao's attributes, then MXQuantizationSpec's (an MX edge shares only with the same format
  // and blocking; affine specs have none of them, so torchao's rule is unchanged for them).
  for (const char* name : {"dtype", "is_dynamic", "quant_min", "quant_max", "qscheme", "ch_axis", "scale",
                           "zero_point", "elem_format", "block_size", "axis", "rounding", "scale_mode",
                           "flush_fp32_subnorms", "seed"}) {
    const auto x = a.attr(name), y = b.attr(name);
    if (x.has_value() != y.has_value()) return false;
    if (x && !sameValue(*x, *y)) return false;
  }
  return true;
}

}  // namespace pt2q
