#pragma once
// C++ warnings (TORCH_WARN, from pt2q's passes and observers or from the ATen ops they call)
// raised inside a binding surface as Python UserWarnings once the call returns, so that
// `warnings.catch_warnings` and warning filters see them as they see torchao's.
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace pt2q::python {

class CollectedWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& w) override { messages.push_back(w.msg()); }
  // Re-raises the collected warnings in Python; a filter that turns them into errors raises.
  void emit() {
    for (const std::string& m : messages) {
      if (PyErr_WarnEx(PyExc_UserWarning, m.c_str(), 1) < 0) throw pybind11::error_already_set();
    }
    messages.clear();
  }
  std::vector<std::string> messages;
};

/// Runs f() with C++ warnings collected, then raises them as Python warnings (not when f throws:
/// the error is what the caller needs to see).
template <class F>
decltype(auto) withPythonWarnings(F&& f) {
  CollectedWarnings collected;
  if constexpr (std::is_void_v<std::invoke_result_t<F>>) {
    {
      c10::WarningUtils::WarningHandlerGuard guard(&collected);
      std::forward<F>(f)();
    }
    collected.emit();
  } else {
    auto result = [&] {
      c10::WarningUtils::WarningHandlerGuard guard(&collected);
      return std::forward<F>(f)();
    }();
    collected.emit();
    return result;
  }
}

}  // namespace pt2q::python
