// Parsing the IR text form (grammar in docs/ir_text.md): a lexer and a recursive-descent parser
// that builds the Graph directly and names the line and column of every error.
#include <c10/util/Exception.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include "graph/ir_text.h"
#include "graph/verifier.h"

namespace pt2q {
namespace {

enum class Tok { kEnd, kValue, kGlobal, kIdent, kInt, kFloat, kString, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier / name / string contents / number spelling / punctuation
  int line = 0;
  int col = 0;
};

class Lexer {
 public:
  Lexer(std::string_view s, std::string source) : s_(s), source_(std::move(source)) {}

  Token next() {
    skipSpaceAndComments();
    Token t;
    t.line = line_;
    t.col = col();
    if (i_ >= s_.size()) return t;
    const char c = s_[i_];
    if (c == '%' || c == '@') {
      ++i_;
      t.kind = c == '%' ? Tok::kValue : Tok::kGlobal;
      t.text = word(/*dots=*/c == '@');
      if (t.text.empty()) fail(t, std::string("a name after '") + c + "'");
      return t;
    }
    if (c == '"') {
      t.kind = Tok::kString;
      t.text = string(t);
      return t;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '-' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
      return number(t);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      t.kind = Tok::kIdent;
      t.text = word(/*dots=*/true);
      return t;
    }
    if (std::string_view("()[]{},:=-").find(c) != std::string_view::npos) {
      ++i_;
      t.kind = Tok::kPunct;
      t.text = std::string(1, c);
      return t;
    }
    fail(t, "a token", std::string("'") + c + "'");
    return t;
  }

  [[noreturn]] void fail(const Token& at, const std::string& expected, const std::string& got = "") const {
    TORCH_CHECK(false, source_, ":", at.line, ":", at.col, ": expected ", expected,
                got.empty() ? "" : ", got " + got);
  }

 private:
  int col() const { return static_cast<int>(i_ - line_start_) + 1; }

  void skipSpaceAndComments() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\n') {
        ++i_;
        ++line_;
        line_start_ = i_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string word(bool dots = false) {
    const size_t b = i_;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dots && c == '.')) {
        ++i_;
      } else {
        break;
      }
    }
    return std::string(s_.substr(b, i_ - b));
  }

  std::string string(const Token& t) {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n') fail(t, "a closing '\"'", "the end of the line");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail(t, "an escape after '\\'", "the end of the text");
      const char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'x': {
          if (i_ + 2 > s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])) ||
              !std::isxdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
            fail(t, "two hex digits after \\x");
          }
          out += static_cast<char>(std::strtol(std::string(s_.substr(i_, 2)).c_str(), nullptr, 16));
          i_ += 2;
          break;
        }
        default: fail(t, "one of \\n \\t \\r \\\" \\\\ \\xHH", std::string("\\") + e);
      }
    }
  }

  Token number(Token t) {
    const size_t b = i_;
    if (s_[i_] == '-') ++i_;
    bool is_float = false;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++i_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
        ++i_;
        if ((c == 'e' || c == 'E') && i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      } else {
        break;
      }
    }
    t.kind = is_float ? Tok::kFloat : Tok::kInt;
    t.text = std::string(s_.substr(b, i_ - b));
    return t;
  }

  std::string_view s_;
  std::string source_;
  size_t i_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

// Namespaces whose operators are registered by Python libraries (torch.ao's quantized_decomposed,
// torchao's affine ops): a graph printed in a Python process writes them bare, and a C++-only
// process (pt2q-opt) must still read it; they become opaque calls there.
bool registeredFromPython(const std::string& target) {
  return target.rfind("quantized_decomposed.", 0) == 0 || target.rfind("torchao.", 0) == 0;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : lex_(text, source) { advance(); }

  // The main graph, then its subgraphs, each named by its path (docs/ir_text.md).
  std::unique_ptr<Graph> parse() {
    auto main = std::make_unique<Graph>();
    parseOne(*main);
    while (tok_.kind != Tok::kEnd) {
      if (!(tok_.kind == Tok::kIdent && tok_.text == "graph")) fail("the end of the graph after 'return', or a subgraph");
      auto sub = std::make_shared<Graph>();
      const Token at = tok_;
      parseOne(*sub);
      attach(*main, sub->name(), sub, at);
    }
    verify(*main);
    return main;
  }

 private:
  // A subgraph path "a.b" goes into subgraph "a" when there is one, else it is a path of its own.
  void attach(Graph& g, const std::string& path, std::shared_ptr<Graph> sub, const Token& at) {
    const size_t dot = path.find('.');
    if (dot != std::string::npos) {
      auto it = g.subgraphs().find(path.substr(0, dot));
      if (it != g.subgraphs().end()) return attach(*it->second, path.substr(dot + 1), std::move(sub), at);
    }
    if (g.subgraphs().count(path)) lex_.fail(at, "a new subgraph name", "@" + path + " a second time");
    sub->setName(path);
    g.subgraphs()[path] = std::move(sub);
  }

  void parseOne(Graph& target) {
    graph_ = &target;
    expectIdent("graph");
    if (tok_.kind != Tok::kGlobal) fail("the graph's name, '@name'");
    graph_->setName(tok_.text);
    advance();
    expectPunct("(");
    if (!isPunct(")")) {
      do {
        parseParam();
      } while (acceptPunct(","));
    }
    expectPunct(")");
    expectPunct(":");
    while (!(tok_.kind == Tok::kIdent && tok_.text == "return")) {
      if (tok_.kind == Tok::kEnd) fail("a node or 'return'");
      parseNode();
    }
    advance();
    Node* out = graph_->setOutput(parseArg());
    if (isPunct("{")) parseMeta(out->meta());
  }

  void advance() { tok_ = lex_.next(); }
  [[noreturn]] void fail(const std::string& expected) const { lex_.fail(tok_, expected, describe(tok_)); }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::kEnd: return "the end of the text";
      case Tok::kValue: return "%" + t.text;
      case Tok::kGlobal: return "@" + t.text;
      case Tok::kString: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  bool isPunct(const char* p) const { return tok_.kind == Tok::kPunct && tok_.text == p; }
  bool acceptPunct(const char* p) {
    if (!isPunct(p)) return false;
    advance();
    return true;
  }
  void expectPunct(const char* p) {
    if (!acceptPunct(p)) fail(std::string("'") + p + "'");
  }
  void expectIdent(const char* w) {
    if (tok_.kind != Tok::kIdent || tok_.text != w) fail(std::string("'") + w + "'");
    advance();
  }
  std::string expectString(const char* what) {
    if (tok_.kind != Tok::kString) fail(what);
    std::string s = tok_.text;
    advance();
    return s;
  }
  std::string defineName() {
    const std::string name = tok_.text;
    if (graph_->findNode(name) != nullptr) fail("a new value name (%" + name + " is already defined)");
    return name;
  }

  void parseParam() {
    if (tok_.kind != Tok::kValue) fail("a parameter '%name'");
    const std::string name = defineName();
    advance();
    Node* p = graph_->addPlaceholder(name);
    if (acceptPunct(":")) parseTypes(p->meta());
    if (acceptPunct("=")) p->setArgs({parseArg()});
    if (isPunct("{")) parseMeta(p->meta());
  }

  void parseNode() {
    if (tok_.kind != Tok::kValue) fail("a node '%name = ...' or 'return'");
    const std::string name = defineName();
    advance();
    expectPunct("=");
    if (tok_.kind != Tok::kIdent) fail("get_attr, call_module, call_opaque or an operator such as aten.add.Tensor");
    const Token callee = tok_;
    advance();
    Node* n;
    if (callee.text == "get_attr") {
      n = graph_->create(NodeKind::kGetAttr, expectString("the attribute path as a string"), {}, {}, name);
    } else if (callee.text == "call_module" || callee.text == "call_opaque") {
      const std::string target = expectString("the target as a string");
      auto [args, kwargs] = parseCallArgs();
      n = graph_->create(callee.text == "call_module" ? NodeKind::kCallModule : NodeKind::kCallFunction, target,
                         std::move(args), std::move(kwargs), name);
      if (callee.text == "call_opaque" && n->op().has_value()) {
        lex_.fail(callee, "an opaque target", "\"" + target + "\", an operator the dispatcher knows (write it bare)");
      }
    } else {
      if (!findOperator(callee.text).has_value() && !registeredFromPython(callee.text)) {
        lex_.fail(callee, "an operator the dispatcher knows (opaque callables are written call_opaque \"name\")",
                  "'" + callee.text + "'");
      }
      auto [args, kwargs] = parseCallArgs();
      n = graph_->create(NodeKind::kCallFunction, callee.text, std::move(args), std::move(kwargs), name);
    }
    if (n->name() != name) fail("a value name");  // create() never renames a free name
    if (acceptPunct(":")) parseTypes(n->meta());
    if (isPunct("{")) parseMeta(n->meta());
  }

  std::pair<std::vector<Argument>, std::vector<std::pair<std::string, Argument>>> parseCallArgs() {
    std::vector<Argument> args;
    std::vector<std::pair<std::string, Argument>> kwargs;
    expectPunct("(");
    if (!isPunct(")")) {
      do {
        if (tok_.kind == Tok::kIdent && tok_.text.find('.') == std::string::npos && peekIsEquals()) {
          const std::string key = tok_.text;
          advance();
          expectPunct("=");
          kwargs.emplace_back(key, parseArg());
        } else {
          if (!kwargs.empty()) fail("a keyword argument (positional arguments come first)");
          args.push_back(parseArg());
        }
      } while (acceptPunct(","));
    }
    expectPunct(")");
    return {std::move(args), std::move(kwargs)};
  }

  // Whether the identifier token is followed by '=' (a keyword argument).
  bool peekIsEquals() {
    Lexer saved = lex_;
    const Token t = lex_.next();
    lex_ = saved;
    return t.kind == Tok::kPunct && t.text == "=";
  }

  Argument parseArg() {
    const Token t = tok_;
    switch (t.kind) {
      case Tok::kValue: {
        Node* n = graph_->findNode(t.text);
        if (n == nullptr) fail("a value defined above");
        advance();
        return Argument(n);
      }
      case Tok::kInt: {
        errno = 0;
        const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) fail("an integer that fits in 64 bits");
        advance();
        return Argument(static_cast<int64_t>(v));
      }
      case Tok::kFloat: {
        char* end = nullptr;
        const double v = std::strtod(t.text.c_str(), &end);
        if (end != t.text.c_str() + t.text.size()) fail("a number");
        advance();
        return Argument(v);
      }
      case Tok::kString: advance(); return Argument(t.text);
      case Tok::kPunct:
        if (t.text == "[" || t.text == "(") return parseSequence(t.text == "[");
        if (t.text == "-") {
          advance();
          if (tok_.kind == Tok::kIdent && tok_.text == "inf") {
            advance();
            return Argument(-std::numeric_limits<double>::infinity());
          }
          fail("'inf' after '-'");
        }
        fail("an argument");
      case Tok::kIdent: return parseWordArg();
      default: fail("an argument");
    }
  }

  Argument parseSequence(bool list) {
    advance();
    const char* close = list ? "]" : ")";
    std::vector<Argument> items;
    bool trailing_comma = false;
    while (!isPunct(close)) {
      items.push_back(parseArg());
      trailing_comma = acceptPunct(",");
      if (!trailing_comma && !isPunct(close)) fail(std::string("',' or '") + close + "'");
    }
    advance();
    if (!list && items.size() == 1 && !trailing_comma) fail("a 1-tuple written '(x,)'");
    if (list) return Argument(ArgList{std::move(items)});
    return Argument(ArgTuple{std::move(items)});
  }

  Argument parseWordArg() {
    const std::string w = tok_.text;
    if (w == "none") return advance(), Argument();
    if (w == "true") return advance(), Argument(true);
    if (w == "false") return advance(), Argument(false);
    if (w == "inf") return advance(), Argument(std::numeric_limits<double>::infinity());
    if (w == "nan") return advance(), Argument(std::numeric_limits<double>::quiet_NaN());
    if (w == "sym") {
      advance();
      expectPunct("(");
      SymExpr e{expectString("a symbolic expression as a string")};
      expectPunct(")");
      return Argument(std::move(e));
    }
    if (w == "op") {
      advance();
      expectPunct("(");
      OpRef o{expectString("an operator name as a string, such as \"aten.mm\"")};
      expectPunct(")");
      return Argument(std::move(o));
    }
    if (w == "torch.device") {
      advance();
      expectPunct("(");
      const std::string d = expectString("a device string such as \"cuda:0\"");
      expectPunct(")");
      try {
        return Argument(c10::Device(d));
      } catch (const c10::Error&) {
        fail("a valid device string (got \"" + d + "\")");
      }
    }
    if (w.rfind("torch.", 0) == 0) {
      const std::string_view n = std::string_view(w).substr(6);
      if (auto d = dtypeFromTorchName(n)) return advance(), Argument(*d);
      if (auto l = layoutFromName(n)) return advance(), Argument(*l);
      if (auto m = memoryFormatFromName(n)) return advance(), Argument(*m);
    }
    fail("an argument (a value, number, string, none, true, false, torch.<dtype|layout|memory format>, "
         "torch.device(\"...\"), sym(\"...\") or op(\"...\"))");
  }

  void parseTypes(NodeMeta& m) {
    if (isPunct("(")) {
      advance();
      m.tuple_output = true;
      while (!isPunct(")")) {
        m.types.push_back(parseType());
        if (!acceptPunct(",") && !isPunct(")")) fail("',' or ')'");
      }
      advance();
    } else {
      m.types.push_back(parseType());
    }
  }

  ValueType parseType() {
    if (tok_.kind != Tok::kIdent) fail("a type such as f32[2, 3], tensor, sym");
    ValueType t;
    const std::string w = tok_.text;
    advance();
    if (w == "sym" || w == "symfloat" || w == "symbool") {
      t.kind = w == "sym" ? ValueType::Kind::kSymInt
                          : (w == "symfloat" ? ValueType::Kind::kSymFloat : ValueType::Kind::kSymBool);
      if (acceptPunct("(")) {
        t.value = SymExpr{expectString("a symbolic expression as a string")};
        expectPunct(")");
      }
      return t;
    }
    if (w != "tensor") {
      t.dtype = dtypeFromShortName(w);
      if (!t.dtype) fail("a dtype such as f32, bf16, i8 (got '" + w + "')");
    }
    if (acceptPunct("[")) {
      std::vector<Dim> dims;
      while (!isPunct("]")) {
        if (tok_.kind == Tok::kInt) {
          dims.emplace_back(static_cast<int64_t>(std::strtoll(tok_.text.c_str(), nullptr, 10)));
        } else if (tok_.kind == Tok::kIdent || tok_.kind == Tok::kString) {
          dims.emplace_back(SymExpr{tok_.text});
        } else {
          fail("a dimension: an integer, a symbol or a quoted expression");
        }
        advance();
        if (!acceptPunct(",") && !isPunct("]")) fail("',' or ']'");
      }
      advance();
      t.shape = std::move(dims);
    }
    return t;
  }

  void parseMeta(NodeMeta& m) {
    expectPunct("{");
    while (!isPunct("}")) {
      if (tok_.kind == Tok::kIdent && tok_.text == "nn_module_stack") {
        advance();
        expectPunct("=");
        expectPunct("[");
        while (!isPunct("]")) {
          expectPunct("(");
          ModuleFrame f;
          f.key = expectString("the frame's key");
          expectPunct(",");
          f.path = expectString("the module path");
          expectPunct(",");
          f.type = expectString("the module type");
          expectPunct(")");
          m.nn_module_stack.push_back(std::move(f));
          if (!acceptPunct(",") && !isPunct("]")) fail("',' or ']'");
        }
        advance();
      } else if (tok_.kind == Tok::kIdent && (tok_.text == "stack_trace" || tok_.text == "annotation")) {
        const bool trace = tok_.text == "stack_trace";
        advance();
        expectPunct("=");
        (trace ? m.stack_trace : m.annotation) = expectString("a string");
      } else if (tok_.kind == Tok::kString) {
        std::string key = tok_.text;
        advance();
        expectPunct("=");
        m.extra.emplace_back(std::move(key), expectString("a string value"));
      } else {
        fail("nn_module_stack, stack_trace, annotation or a \"key\" = \"value\" pair");
      }
      if (!acceptPunct(",") && !isPunct("}")) fail("',' or '}'");
    }
    advance();
  }

  Lexer lex_;
  Token tok_;
  Graph* graph_ = nullptr;
};

}  // namespace

std::unique_ptr<Graph> parseGraph(std::string_view text, const std::string& source) {
  return Parser(text, source).parse();
}

}  // namespace pt2q
