// Calibration observers: running statistics of a tensor and the quantization parameters they
// give, bit-identical to torch.ao's observers (../shared/reference/pt2e_contract.md §3).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pt2q {

/// torch.ao's qschemes.
enum class QScheme : uint8_t {
  kPerTensorAffine,
  kPerTensorSymmetric,
  kPerChannelAffine,
  kPerChannelSymmetric,
  kPerChannelAffineFloatQParams,
};

/// What an observer quantizes to, as torch.ao's observer constructors take it.
struct ObserverSpec {
  c10::ScalarType dtype = c10::kChar;  // int8; kByte = uint8, kShort, kUInt16, kInt
  QScheme qscheme = QScheme::kPerTensorAffine;
  std::optional<int64_t> quant_min;  // both set: a customized range (contract §3.1)
  std::optional<int64_t> quant_max;
  bool reduce_range = false;
  int64_t ch_axis = 0;               // per-channel observers
  double averaging_constant = 0.01;  // moving-average observers
  float eps = 1.1920928955078125e-07f;  // torch.finfo(torch.float32).eps
  int64_t bins = 2048;                  // HistogramObserver
  double scale = 1.0;                   // FixedQParamsObserver
  int64_t zero_point = 0;
};

/// (quant_min, quant_max) of a spec: utils.calculate_qmin_qmax (contract §3.1). Throws for an
/// invalid customized range, naming it.
std::pair<int64_t, int64_t> calculateQminQmax(const ObserverSpec& spec);

/// Quantization parameters: scale (fp32) and zero point (int64, int32 for the affine branch,
/// fp32 for float qparams), shape [1] per tensor or [C] per channel.
struct QParams {
  at::Tensor scale;
  at::Tensor zero_point;
};

/// UniformQuantizationObserverBase._calculate_qparams (contract §3.2) on fp32 min/max tensors.
QParams calculateQParams(const at::Tensor& min_val, const at::Tensor& max_val, const ObserverSpec& spec);

/// A running min/max observer. Calibration data goes through observe(); computeQParams() is
/// pure; merge() folds in another observer's statistics (calibration split over processes).
class Observer {
 public:
  virtual ~Observer() = default;
  /// Updates the statistics with x (any float dtype, converted to fp32 first; empty x is skipped).
  virtual void observe(const at::Tensor& x) = 0;
  /// Combines `other`'s statistics into this one's: elementwise min of minima and max of
  /// maxima (for moving averages a conservative union, since two averages cannot be replayed).
  virtual void merge(const Observer& other);
  virtual QParams computeQParams() const { return calculateQParams(min_val_, max_val_, spec_); }
  const at::Tensor& minVal() const { return min_val_; }
  const at::Tensor& maxVal() const { return max_val_; }
  const ObserverSpec& spec() const { return spec_; }
  virtual std::string kind() const = 0;
  /// The running statistics by torch.ao's buffer names (min_val, max_val, histogram), for
  /// state dicts and state files; setState() takes what state() gave, checking names and shapes.
  virtual std::vector<std::pair<std::string, at::Tensor>> state() const;
  virtual void setState(const std::vector<std::pair<std::string, at::Tensor>>& state);

 protected:
  explicit Observer(ObserverSpec spec);
  /// Throws unless `state` holds exactly `names`, in order.
  void checkState(const std::vector<std::pair<std::string, at::Tensor>>& state,
                  const std::vector<std::string>& names) const;
  ObserverSpec spec_;
  at::Tensor min_val_;  // fp32; +inf / -inf before any data, as torch.ao
  at::Tensor max_val_;
};

/// MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver,
/// MovingAveragePerChannelMinMaxObserver, HistogramObserver, PlaceholderObserver and
/// FixedQParamsObserver, by torch.ao's class name. Throws for another name or a qscheme the
/// class does not take.
std::unique_ptr<Observer> makeObserver(const std::string& class_name, const ObserverSpec& spec);

// Constructors of the classes defined outside minmax.cpp (makeObserver dispatches to them).
std::unique_ptr<Observer> makeHistogramObserver(const ObserverSpec& spec);
std::unique_ptr<Observer> makePlaceholderObserver(const ObserverSpec& spec);
std::unique_ptr<Observer> makeFixedQParamsObserver(const ObserverSpec& spec);

/// HistogramObserver._compute_quantization_error(start_bin, end_bin) of a HistogramObserver.
double histogramQuantizationError(const Observer& histogram_observer, int64_t start_bin, int64_t end_bin);

/// Throws, naming `who`, if the min/max of an observed batch hold a NaN (or an infinity, unless
/// inf_ok): torch.ao would carry it into the range, or fail inside torch.histc, and give
/// unusable qparams.
void checkObservedRange(const std::string& who, const at::Tensor& min, const at::Tensor& max, bool inf_ok);

}  // namespace pt2q
