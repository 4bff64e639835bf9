// The C++ graph interpreter (see interpreter.h).
#include "graph/interpreter.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/jit_type.h>
#include <ATen/native/TypeProperties.h>

#include <map>

#include "graph/ir_text.h"

namespace pt2q {
namespace {

// Where a call argument comes from when the graph runs: a value slot, or a constant IValue
// built once from the literal and the schema type.
struct Operand {
  int64_t slot = -1;      // node value, when >= 0
  c10::IValue constant;   // otherwise
  // A list of operands (e.g. Tensor[] of nodes) rebuilt at run time as a typed list.
  std::vector<Operand> items;
  c10::TypePtr list_elem;  // set when `items` is used
  bool is_tuple = false;
};

[[noreturn]] void failAt(const Node& n, const std::string& what) {
  TORCH_CHECK(false, "interpreter: node %", n.name(), " (", printNode(n), "): ", what);
}

c10::IValue literal(const Argument& a, const c10::TypePtr& t, const Node& n);

// A typed list IValue from constant items.
c10::IValue typedList(const std::vector<c10::IValue>& items, const c10::TypePtr& elem) {
  c10::impl::GenericList list(elem);
  for (const auto& v : items) list.push_back(v);
  return c10::IValue(std::move(list));
}

c10::IValue literal(const Argument& a, const c10::TypePtr& t, const Node& n) {
  const c10::TypePtr real = t->kind() == c10::TypeKind::OptionalType ? t->expectRef<c10::OptionalType>().getElementType() : t;
  if (a.isNone()) return c10::IValue();
  if (real->kind() == c10::TypeKind::TensorType && (a.is<int64_t>() || a.is<double>() || a.is<bool>())) {
    // A Python number passed for a Tensor: a 0-dim "wrapped number" tensor, as torch's argument
    // parser makes it, so that type promotion treats it as a scalar.
    const c10::Scalar v = a.is<int64_t>() ? c10::Scalar(a.as<int64_t>())
                          : a.is<double>() ? c10::Scalar(a.as<double>())
                                           : c10::Scalar(a.as<bool>());
    at::Tensor t = c10::scalar_to_tensor(v);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return c10::IValue(std::move(t));
  }
  if (a.is<bool>()) return c10::IValue(a.as<bool>());
  if (a.is<int64_t>()) {
    if (real->kind() == c10::TypeKind::FloatType) return c10::IValue(static_cast<double>(a.as<int64_t>()));
    if (real->kind() == c10::TypeKind::ListType) {  // int[2] stride=1
      return typedList({c10::IValue(a.as<int64_t>())}, real->expectRef<c10::ListType>().getElementType());
    }
    return c10::IValue(a.as<int64_t>());
  }
  if (a.is<double>()) return c10::IValue(a.as<double>());
  if (a.is<std::string>()) {
    if (real->kind() == c10::TypeKind::DeviceObjType) return c10::IValue(c10::Device(a.as<std::string>()));
    return c10::IValue(a.as<std::string>());
  }
  if (a.is<c10::ScalarType>()) return c10::IValue(static_cast<int64_t>(a.as<c10::ScalarType>()));
  if (a.is<c10::Layout>()) return c10::IValue(static_cast<int64_t>(a.as<c10::Layout>()));
  if (a.is<c10::MemoryFormat>()) return c10::IValue(static_cast<int64_t>(a.as<c10::MemoryFormat>()));
  if (a.is<c10::Device>()) return c10::IValue(a.as<c10::Device>());
  if (a.is<SymExpr>()) failAt(n, "a symbolic size (" + a.as<SymExpr>().expr + ") has no value outside tracing");
  failAt(n, "unsupported literal");
}

bool hasNodes(const Argument& a) {
  bool found = false;
  forEachNode(a, [&](Node*) { found = true; });
  return found;
}

}  // namespace

struct Interpreter::Step {
  const Node* node = nullptr;
  enum class Kind { kInput, kConstant, kOp, kOutDtype, kGetItem, kCond, kSkip, kOutput } kind = Kind::kSkip;
  int64_t input_index = -1;
  c10::IValue constant;
  std::optional<c10::OperatorHandle> op;  // kOutDtype: the wrapped operator
  std::vector<Operand> operands;  // kOp, kOutDtype: one per schema argument; kGetItem: container, index
  c10::ScalarType out_dtype = c10::ScalarType::Undefined;  // kOutDtype
  size_t num_returns = 0;
  std::vector<int64_t> release;   // slots whose last use is this step
  Operand output;                 // kOutput
  const Interpreter* branch_true = nullptr;   // kCond
  const Interpreter* branch_false = nullptr;
};

namespace {

Operand operandOf(const Argument& a, const c10::TypePtr& t, const Node& n, const std::map<const Node*, int64_t>& slot) {
  Operand o;
  if (a.isNode()) {
    o.slot = slot.at(a.node());
    return o;
  }
  if ((a.is<ArgList>() || a.is<ArgTuple>()) && (hasNodes(a) || t == nullptr || t->kind() == c10::TypeKind::ListType ||
                                                (t->kind() == c10::TypeKind::OptionalType))) {
    const auto& items = a.is<ArgList>() ? a.as<ArgList>().items : a.as<ArgTuple>().items;
    c10::TypePtr real = t;
    if (real && real->kind() == c10::TypeKind::OptionalType) real = real->expectRef<c10::OptionalType>().getElementType();
    o.list_elem = real && real->kind() == c10::TypeKind::ListType ? real->expectRef<c10::ListType>().getElementType()
                                                                   : c10::AnyType::get();
    o.is_tuple = a.is<ArgTuple>() && (t == nullptr);
    for (const Argument& x : items) o.items.push_back(operandOf(x, o.list_elem, n, slot));
    return o;
  }
  o.constant = literal(a, t ? t : c10::AnyType::get(), n);
  return o;
}

c10::IValue valueOf(const Operand& o, const std::vector<c10::IValue>& values) {
  if (o.slot >= 0) return values[static_cast<size_t>(o.slot)];
  if (o.list_elem == nullptr) return o.constant;
  std::vector<c10::IValue> items;
  items.reserve(o.items.size());
  for (const Operand& x : o.items) items.push_back(valueOf(x, values));
  if (o.is_tuple) return c10::ivalue::Tuple::create(std::move(items));
  if (o.list_elem->kind() == c10::TypeKind::AnyType) {
    c10::impl::GenericList list(c10::AnyType::get());
    for (auto& v : items) list.push_back(std::move(v));
    return c10::IValue(std::move(list));
  }
  return typedList(items, o.list_elem);
}

// One operand per formal argument of `schema`: the call's positional or keyword argument, or
// the formal's default.
std::vector<Operand> bindSchema(const c10::FunctionSchema& schema, const std::vector<Argument>& args,
                                const std::vector<std::pair<std::string, Argument>>& kwargs, const Node& n,
                                const std::map<const Node*, int64_t>& slot) {
  std::vector<Operand> operands;
  const auto& formals = schema.arguments();
  for (size_t k = 0; k < formals.size(); ++k) {
    const Argument* a = k < args.size() ? &args[k] : nullptr;
    for (const auto& kv : kwargs) {
      if (kv.first == formals[k].name()) a = &kv.second;
    }
    if (a != nullptr) {
      operands.push_back(operandOf(*a, formals[k].real_type(), n, slot));
    } else if (formals[k].default_value().has_value()) {
      Operand o;
      o.constant = *formals[k].default_value();
      operands.push_back(std::move(o));
    } else {
      failAt(n, "missing the required argument '" + formals[k].name() + "'");
    }
  }
  return operands;
}

// torch's out_dtype fallback: every tensor argument is cast to the type the arguments promote to
// together with a 1-element tensor of `out`, the operator runs, and its result is cast to `out`.
at::Tensor runOutDtype(const c10::OperatorHandle& op, c10::ScalarType out, c10::Stack& stack) {
  at::native::ResultTypeState state;
  for (const c10::IValue& v : stack) {
    if (v.isTensor()) state = at::native::update_result_type_state(v.toTensor(), state);
  }
  state = at::native::update_result_type_state(at::ones({1}, at::TensorOptions().dtype(out)), state);
  const c10::ScalarType common = at::native::result_type(state);
  for (c10::IValue& v : stack) {
    if (v.isTensor()) v = v.toTensor().to(common);
  }
  op.callBoxed(&stack);
  return stack[0].toTensor().to(out);
}

}  // namespace

Interpreter::Interpreter(const Graph& graph) : graph_(graph) {
  std::map<const Node*, int64_t> slot;
  std::map<const Node*, size_t> last_use;
  const std::vector<Node*> nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    slot[nodes[i]] = static_cast<int64_t>(i);
    for (const Node* in : nodes[i]->inputs()) last_use[in] = i;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    Step s;
    s.node = &n;
    switch (n.kind()) {
      case NodeKind::kPlaceholder:
        s.kind = Step::Kind::kInput;
        s.input_index = static_cast<int64_t>(num_inputs_++);
        break;
      case NodeKind::kGetAttr: {
        if (graph.subgraphs().count(n.target())) {
          s.kind = Step::Kind::kSkip;  // a branch: its users (cond) hold its interpreter
          break;
        }
        auto it = graph.constants().find(n.target());
        if (it == graph.constants().end()) failAt(n, "the graph has no constant named \"" + n.target() + "\"");
        s.kind = Step::Kind::kConstant;
        s.constant = it->second;
        break;
      }
      case NodeKind::kCallModule:
        if (n.target() == "_guards_fn" && n.users().empty()) {
          s.kind = Step::Kind::kSkip;
          break;
        }
        failAt(n, "call_module runs a Python module; the C++ interpreter runs operators only");
      case NodeKind::kOutput:
        s.kind = Step::Kind::kOutput;
        s.output = operandOf(n.args().empty() ? Argument() : n.args()[0], nullptr, n, slot);
        break;
      case NodeKind::kCallFunction: {
        if (n.isOpaque() && n.target() == "torch.ops.higher_order.cond") {
          // cond(pred, true_fn, false_fn, operands): both branches are subgraphs of this graph.
          if (n.args().size() != 4 || !n.kwargs().empty()) failAt(n, "cond takes (pred, true_fn, false_fn, operands)");
          auto branch = [&](const Argument& a) -> const Interpreter* {
            if (!a.isNode() || a.node()->kind() != NodeKind::kGetAttr ||
                !graph.subgraphs().count(a.node()->target())) {
              failAt(n, "a cond branch must be a get_attr of a subgraph, got " + printArgument(a));
            }
            const std::string& path = a.node()->target();
            auto& interp = branches_[path];
            if (!interp) interp = std::make_unique<Interpreter>(*graph.subgraphs().at(path));
            return interp.get();
          };
          s.kind = Step::Kind::kCond;
          s.branch_true = branch(n.args()[1]);
          s.branch_false = branch(n.args()[2]);
          s.operands.push_back(operandOf(n.args()[0], nullptr, n, slot));
          s.operands.push_back(operandOf(n.args()[3], nullptr, n, slot));
          break;
        }
        if (n.isOpaque() && n.target() == "torch.ops.higher_order.out_dtype") {
          // out_dtype(op, dtype, *args): op on args promoted together with dtype, cast to dtype.
          if (n.args().size() < 2 || !n.args()[0].is<OpRef>() || !n.args()[1].is<c10::ScalarType>() ||
              !n.kwargs().empty()) {
            failAt(n, "out_dtype takes (operator, dtype, *args)");
          }
          s.op = findOperator(n.args()[0].as<OpRef>().name);
          if (!s.op) failAt(n, "the dispatcher knows no operator " + n.args()[0].as<OpRef>().name);
          if (s.op->schema().returns().size() != 1) failAt(n, "out_dtype wraps operators with one result");
          s.kind = Step::Kind::kOutDtype;
          s.out_dtype = n.args()[1].as<c10::ScalarType>();
          s.operands = bindSchema(s.op->schema(), std::vector<Argument>(n.args().begin() + 2, n.args().end()), {}, n,
                                  slot);
          break;
        }
        if (n.isOpaque()) {
          if (n.target() != "_operator.getitem" || n.args().size() != 2 || !n.args()[1].is<int64_t>()) {
            failAt(n, "the opaque call " + n.target() + " needs Python (the interpreter runs operators and "
                      "_operator.getitem with a constant index)");
          }
          s.kind = Step::Kind::kGetItem;
          s.operands.push_back(operandOf(n.args()[0], nullptr, n, slot));
          s.constant = c10::IValue(n.args()[1].as<int64_t>());
          break;
        }
        s.kind = Step::Kind::kOp;
        s.op = n.op();
        s.num_returns = n.op()->schema().returns().size();
        s.operands = bindSchema(n.op()->schema(), n.args(), n.kwargs(), n, slot);
        break;
      }
    }
    steps_.push_back(std::move(s));
  }
  for (const auto& [node, i] : last_use) steps_[i].release.push_back(slot[node]);
}

Interpreter::~Interpreter() = default;

c10::IValue Interpreter::run(std::vector<c10::IValue> inputs) const {
  TORCH_CHECK(inputs.size() == num_inputs_, "interpreter: graph @", graph_.name(), " takes ", num_inputs_,
              " input(s), got ", inputs.size());
  std::vector<c10::IValue> values(steps_.size());
  c10::Stack stack;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    switch (s.kind) {
      case Step::Kind::kInput: values[i] = std::move(inputs[static_cast<size_t>(s.input_index)]); break;
      case Step::Kind::kConstant: values[i] = s.constant; break;
      case Step::Kind::kSkip: break;
      case Step::Kind::kGetItem: {
        const c10::IValue c = valueOf(s.operands[0], values);
        const int64_t k = s.constant.toInt();
        if (c.isTuple()) {
          values[i] = c.toTupleRef().elements().at(static_cast<size_t>(k));
        } else if (c.isList()) {
          values[i] = c.toListRef().at(static_cast<size_t>(k));
        } else {
          failAt(*s.node, "getitem on a value that is neither a tuple nor a list");
        }
        break;
      }
      case Step::Kind::kCond: {
        const c10::IValue pred = valueOf(s.operands[0], values);
        const bool take = pred.isTensor() ? pred.toTensor().item<bool>() : pred.toBool();
        const c10::IValue ops = valueOf(s.operands[1], values);
        std::vector<c10::IValue> args;
        if (ops.isTuple()) {
          args = ops.toTupleRef().elements().vec();
        } else {
          for (const c10::IValue& v : ops.toListRef()) args.push_back(v);
        }
        values[i] = (take ? s.branch_true : s.branch_false)->run(std::move(args));
        break;
      }
      case Step::Kind::kOp: {
        stack.clear();
        for (const Operand& o : s.operands) stack.push_back(valueOf(o, values));
        s.op->callBoxed(&stack);
        if (s.num_returns == 1) {
          values[i] = std::move(stack[0]);
        } else {
          values[i] = c10::ivalue::Tuple::create(std::vector<c10::IValue>(stack.begin(), stack.end()));
        }
        break;
      }
      case Step::Kind::kOutDtype: {
        stack.clear();
        for (const Operand& o : s.operands) stack.push_back(valueOf(o, values));
        values[i] = runOutDtype(*s.op, s.out_dtype, stack);
        break;
      }
      case Step::Kind::kOutput: return valueOf(s.output, values);
    }
    for (int64_t r : s.release) values[static_cast<size_t>(r)] = c10::IValue();
  }
  TORCH_CHECK(false, "interpreter: graph @", graph_.name(), " has no output node");
}

}  // namespace pt2q
