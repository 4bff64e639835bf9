// MinMax-family observers (contract §3.3): running or moving-average min/max, per tensor or
// per channel, with torch.ao's update order so that the statistics match bit for bit.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>

#include "observers/observer.h"

namespace pt2q {

Observer::Observer(ObserverSpec spec) : spec_(spec) { calculateQminQmax(spec_); }

void Observer::merge(const Observer& other) {
  TORCH_CHECK(kind() == other.kind(), "observer merge: a ", kind(), " cannot merge a ", other.kind());
  if (other.min_val_.numel() == 0) return;
  if (min_val_.numel() == 0) {
    min_val_ = other.min_val_.clone();
    max_val_ = other.max_val_.clone();
    return;
  }
  TORCH_CHECK(min_val_.sizes() == other.min_val_.sizes(), "observer merge: ", min_val_.numel(), " channels vs ",
              other.min_val_.numel());
  min_val_ = at::minimum(min_val_, other.min_val_);
  max_val_ = at::maximum(max_val_, other.max_val_);
}

std::vector<std::pair<std::string, at::Tensor>> Observer::state() const {
  return {{"min_val", min_val_}, {"max_val", max_val_}};
}

void Observer::setState(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  checkState(state, {"min_val", "max_val"});
  const at::Tensor& mn = state[0].second;
  const at::Tensor& mx = state[1].second;
  TORCH_CHECK(mn.scalar_type() == at::kFloat && mx.scalar_type() == at::kFloat, kind(),
              " state: min_val and max_val must be float32, got ", mn.scalar_type(), " and ", mx.scalar_type());
  TORCH_CHECK(mn.sizes() == mx.sizes() && mn.dim() == min_val_.dim(), kind(), " state: min_val ", mn.sizes(),
              " and max_val ", mx.sizes(), " must both be ", min_val_.dim() == 0 ? "0-d" : "1-d (one per channel)");
  min_val_ = mn.clone();
  max_val_ = mx.clone();
}

void Observer::checkState(const std::vector<std::pair<std::string, at::Tensor>>& state,
                          const std::vector<std::string>& names) const {
  std::string expected;
  for (const auto& n : names) expected += (expected.empty() ? "" : ", ") + n;
  TORCH_CHECK(state.size() == names.size(), kind(), " state: expected ", expected, "; got ", state.size(),
              " tensors");
  for (size_t i = 0; i < state.size(); ++i) {
    TORCH_CHECK(state[i].first == names[i], kind(), " state: expected ", expected, "; got '", state[i].first,
                "' at position ", i);
  }
}

void checkObservedRange(const std::string& who, const at::Tensor& min, const at::Tensor& max, bool inf_ok) {
  const bool nan = at::isnan(min).any().item<bool>() || at::isnan(max).any().item<bool>();
  TORCH_CHECK(!nan, who, ": the observed tensor holds NaN; calibration data must be finite");
  if (inf_ok) return;
  const bool inf = at::isinf(min).any().item<bool>() || at::isinf(max).any().item<bool>();
  TORCH_CHECK(!inf, who, ": the observed tensor holds +-inf, which would make the quantization range infinite");
}

namespace {

const float kInf = std::numeric_limits<float>::infinity();

// (min, max) of each channel: ch_axis moved to 0 by swapping it with 0, the rest flattened.
std::tuple<at::Tensor, at::Tensor> channelMinMax(const at::Tensor& x, int64_t ch_axis) {
  std::vector<int64_t> order(static_cast<size_t>(x.dim()));
  for (int64_t i = 0; i < x.dim(); ++i) order[static_cast<size_t>(i)] = i;
  std::swap(order[0], order[static_cast<size_t>(ch_axis)]);
  return at::aminmax(at::flatten(x.permute(order).to(at::kFloat), 1), 1);
}

class MinMaxObserver : public Observer {
 public:
  MinMaxObserver(const ObserverSpec& s, bool moving) : Observer(s), moving_(moving) {
    TORCH_CHECK(s.qscheme == QScheme::kPerTensorAffine || s.qscheme == QScheme::kPerTensorSymmetric,
                kind(), " takes a per-tensor qscheme");
    // torch.ao refuses this combination too (its zero point 128 would not fit the halved range).
    TORCH_CHECK(!(s.qscheme == QScheme::kPerTensorSymmetric && s.reduce_range && s.dtype == c10::kByte), kind(),
                ": cannot reduce the range of symmetric quantization to quint8");
    min_val_ = at::full({}, kInf, at::kFloat);
    max_val_ = at::full({}, -kInf, at::kFloat);
  }
  std::string kind() const override { return moving_ ? "MovingAverageMinMaxObserver" : "MinMaxObserver"; }
  void observe(const at::Tensor& x_orig) override {
    if (x_orig.numel() == 0) return;
    const at::Tensor x = x_orig.detach().to(at::kFloat);
    auto [cur_min, cur_max] = at::aminmax(x);
    checkObservedRange(kind(), cur_min, cur_max, false);
    if (!moving_) {
      min_val_ = at::minimum(cur_min, min_val_);
      max_val_ = at::maximum(cur_max, max_val_);
    } else if (min_val_.item<float>() == kInf && max_val_.item<float>() == -kInf) {
      min_val_ = cur_min;
      max_val_ = cur_max;
    } else {
      min_val_ = min_val_ + spec_.averaging_constant * (cur_min - min_val_);
      max_val_ = max_val_ + spec_.averaging_constant * (cur_max - max_val_);
    }
  }

 private:
  bool moving_;
};

class PerChannelMinMaxObserver : public Observer {
 public:
  PerChannelMinMaxObserver(const ObserverSpec& s, bool moving) : Observer(s), moving_(moving) {
    TORCH_CHECK(s.qscheme == QScheme::kPerChannelAffine || s.qscheme == QScheme::kPerChannelSymmetric ||
                    s.qscheme == QScheme::kPerChannelAffineFloatQParams,
                kind(), " takes a per-channel qscheme");
    min_val_ = at::empty({0}, at::kFloat);
    max_val_ = at::empty({0}, at::kFloat);
  }
  std::string kind() const override {
    return moving_ ? "MovingAveragePerChannelMinMaxObserver" : "PerChannelMinMaxObserver";
  }
  void observe(const at::Tensor& x_orig) override {
    if (x_orig.numel() == 0) return;
    const int64_t axis = spec_.ch_axis < 0 ? spec_.ch_axis + x_orig.dim() : spec_.ch_axis;
    TORCH_CHECK(axis >= 0 && axis < x_orig.dim(), kind(), ": ch_axis ", spec_.ch_axis, " is out of range for a ",
                x_orig.dim(), "-d input");
    auto [cur_min, cur_max] = channelMinMax(x_orig.detach(), axis);
    checkObservedRange(kind(), cur_min, cur_max, false);
    if (min_val_.numel() == 0) {
      min_val_ = cur_min;
      max_val_ = cur_max;
      return;
    }
    TORCH_CHECK(cur_min.sizes() == min_val_.sizes(), kind(), ": ", cur_min.numel(), " channels now, ",
                min_val_.numel(), " before");
    if (moving_) {
      min_val_ = min_val_ + spec_.averaging_constant * (cur_min - min_val_);
      max_val_ = max_val_ + spec_.averaging_constant * (cur_max - max_val_);
    } else {
      min_val_ = at::minimum(cur_min, min_val_);
      max_val_ = at::maximum(cur_max, max_val_);
    }
  }

 private:
  bool moving_;
};

}  // namespace

std::unique_ptr<Observer> makeObserver(const std::string& name, const ObserverSpec& spec) {
  if (name == "MinMaxObserver") return std::make_unique<MinMaxObserver>(spec, false);
  if (name == "MovingAverageMinMaxObserver") return std::make_unique<MinMaxObserver>(spec, true);
  if (name == "PerChannelMinMaxObserver") return std::make_unique<PerChannelMinMaxObserver>(spec, false);
  if (name == "MovingAveragePerChannelMinMaxObserver") return std::make_unique<PerChannelMinMaxObserver>(spec, true);
  if (name == "HistogramObserver") return makeHistogramObserver(spec);
  if (name == "PlaceholderObserver") return makePlaceholderObserver(spec);
  if (name == "FixedQParamsObserver") return makeFixedQParamsObserver(spec);
  TORCH_CHECK(false, "unknown observer class '", name, "'; pt2q has MinMaxObserver, MovingAverageMinMaxObserver, "
              "PerChannelMinMaxObserver, MovingAveragePerChannelMinMaxObserver, HistogramObserver, "
              "PlaceholderObserver, FixedQParamsObserver");
}

}  // namespace pt2q
