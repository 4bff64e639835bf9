// Observers without running statistics: PlaceholderObserver (dynamic activations and float
// bias; qparams are chosen at run time by choose_qparams, so asking for them is an error) and
// FixedQParamsObserver (qparams given by the quantizer, e.g. sigmoid's 1/256).
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "observers/observer.h"

namespace pt2q {
namespace {

class PlaceholderObserver : public Observer {
 public:
  explicit PlaceholderObserver(const ObserverSpec& s) : Observer(s) {
    min_val_ = at::empty({0}, at::kFloat);
    max_val_ = at::empty({0}, at::kFloat);
  }
  std::string kind() const override { return "PlaceholderObserver"; }
  void observe(const at::Tensor&) override {}
  void merge(const Observer& other) override {
    TORCH_CHECK(other.kind() == kind(), "observer merge: a ", kind(), " cannot merge a ", other.kind());
  }
  QParams computeQParams() const override {
    TORCH_CHECK(false, "calculate_qparams should not be called for PlaceholderObserver: its qparams are chosen at "
                "run time (dynamic quantization) or not at all (float)");
  }
  std::vector<std::pair<std::string, at::Tensor>> state() const override { return {}; }
  void setState(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    checkState(state, {});
  }
};

class FixedQParamsObserver : public Observer {
 public:
  explicit FixedQParamsObserver(const ObserverSpec& s) : Observer(s) {
    TORCH_CHECK(s.qscheme == QScheme::kPerTensorAffine || s.qscheme == QScheme::kPerTensorSymmetric,
                "FixedQParamsObserver takes a per-tensor qscheme");
    scale_ = at::full({1}, s.scale, at::kFloat);
    zero_point_ = at::full({1}, s.zero_point, at::kInt);
    min_val_ = at::empty({0}, at::kFloat);
    max_val_ = at::empty({0}, at::kFloat);
  }
  std::string kind() const override { return "FixedQParamsObserver"; }
  void observe(const at::Tensor&) override {}
  void merge(const Observer& other) override {
    TORCH_CHECK(other.kind() == kind(), "observer merge: a ", kind(), " cannot merge a ", other.kind());
    const QParams q = other.computeQParams();
    TORCH_CHECK(at::equal(q.scale, scale_) && at::equal(q.zero_point, zero_point_),
                "observer merge: FixedQParamsObserver with scale ", scale_.item<float>(), ", zero point ",
                zero_point_.item<int>(), " cannot merge one with scale ", q.scale.item<float>(), ", zero point ",
                q.zero_point.item<int>());
  }
  QParams computeQParams() const override { return {scale_.clone(), zero_point_.clone()}; }
  std::vector<std::pair<std::string, at::Tensor>> state() const override {
    return {{"scale", scale_}, {"zero_point", zero_point_}};
  }
  void setState(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    checkState(state, {"scale", "zero_point"});
    scale_ = state[0].second.to(at::kFloat).reshape({1}).clone();
    zero_point_ = state[1].second.to(at::kInt).reshape({1}).clone();
  }

 private:
  at::Tensor scale_;
  at::Tensor zero_point_;
};

}  // namespace

std::unique_ptr<Observer> makePlaceholderObserver(const ObserverSpec& spec) {
  return std::make_unique<PlaceholderObserver>(spec);
}

std::unique_ptr<Observer> makeFixedQParamsObserver(const ObserverSpec& spec) {
  return std::make_unique<FixedQParamsObserver>(spec);
}

}  // namespace pt2q
