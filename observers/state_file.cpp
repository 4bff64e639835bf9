// Observer <-> state file records.
#include "observers/state_file.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "graph/ir_text.h"
#include "proto/observer_state_file.h"

namespace pt2q {

std::string qschemeName(QScheme q) {
  switch (q) {
    case QScheme::kPerTensorAffine: return "per_tensor_affine";
    case QScheme::kPerTensorSymmetric: return "per_tensor_symmetric";
    case QScheme::kPerChannelAffine: return "per_channel_affine";
    case QScheme::kPerChannelSymmetric: return "per_channel_symmetric";
    case QScheme::kPerChannelAffineFloatQParams: return "per_channel_affine_float_qparams";
  }
  return "?";
}

std::optional<QScheme> qschemeFromName(const std::string& n) {
  for (QScheme q : {QScheme::kPerTensorAffine, QScheme::kPerTensorSymmetric, QScheme::kPerChannelAffine,
                    QScheme::kPerChannelSymmetric, QScheme::kPerChannelAffineFloatQParams}) {
    if (qschemeName(q) == n) return q;
  }
  return std::nullopt;
}

std::string serializeObservers(const std::vector<std::pair<std::string, const Observer*>>& observers) {
  std::vector<ObserverStateRecord> recs;
  for (const auto& [name, o] : observers) {
    ObserverStateRecord r;
    r.name = name;
    r.kind = o->kind();
    const ObserverSpec& s = o->spec();
    r.spec = {dtypeTorchName(s.dtype), qschemeName(s.qscheme), s.quant_min.has_value(), s.quant_min.value_or(0),
              s.quant_max.value_or(0), s.reduce_range, s.ch_axis, s.averaging_constant, s.eps, s.bins, s.scale,
              s.zero_point};
    for (const auto& [tname, t] : o->state()) {
      const at::Tensor c = t.detach().cpu().contiguous();
      r.tensors.push_back({tname, dtypeTorchName(c.scalar_type()), c.sizes().vec(),
                           std::string(static_cast<const char*>(c.const_data_ptr()), c.numel() * c.element_size())});
    }
    recs.push_back(std::move(r));
  }
  return encodeObserverStateFile(recs, "pt2q");
}

std::vector<NamedObserver> deserializeObservers(const std::string& bytes, const std::string& source) {
  std::vector<NamedObserver> out;
  for (const ObserverStateRecord& r : decodeObserverStateFile(bytes, source)) {
    const std::string at = source + ": observer \"" + r.name + "\" (" + r.kind + ")";
    ObserverSpec s;
    const auto dtype = dtypeFromTorchName(r.spec.dtype);
    TORCH_CHECK(dtype.has_value(), at, ": unknown dtype \"", r.spec.dtype, "\"");
    const auto qscheme = qschemeFromName(r.spec.qscheme);
    TORCH_CHECK(qscheme.has_value(), at, ": unknown qscheme \"", r.spec.qscheme, "\"");
    s.dtype = *dtype;
    s.qscheme = *qscheme;
    if (r.spec.has_range) {
      s.quant_min = r.spec.quant_min;
      s.quant_max = r.spec.quant_max;
    }
    s.reduce_range = r.spec.reduce_range;
    s.ch_axis = r.spec.ch_axis;
    s.averaging_constant = r.spec.averaging_constant;
    s.eps = r.spec.eps;
    s.bins = r.spec.bins;
    s.scale = r.spec.scale;
    s.zero_point = r.spec.zero_point;
    std::unique_ptr<Observer> o;
    try {
      o = makeObserver(r.kind, s);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, at, ": ", e.what_without_backtrace());
    }
    std::vector<std::pair<std::string, at::Tensor>> state;
    for (const StateTensorRecord& t : r.tensors) {
      const auto tdtype = dtypeFromTorchName(t.dtype);
      TORCH_CHECK(tdtype.has_value() && !c10::isQIntType(*tdtype), at, ": tensor \"", t.name, "\" has dtype \"",
                  t.dtype, "\"");
      int64_t numel = 1;
      for (int64_t d : t.shape) {
        TORCH_CHECK(d >= 0 && d <= (int64_t{1} << 32), at, ": tensor \"", t.name, "\" has a size of ", d);
        numel *= d;
        TORCH_CHECK(numel <= (int64_t{1} << 32), at, ": tensor \"", t.name, "\" has too many elements");
      }
      const size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(*tdtype);
      TORCH_CHECK(t.data.size() == nbytes, at, ": tensor \"", t.name, "\" has ", t.data.size(), " bytes for ", numel,
                  " ", t.dtype, " elements");
      at::Tensor v = at::empty(t.shape, at::TensorOptions().dtype(*tdtype));
      if (nbytes > 0) std::memcpy(v.mutable_data_ptr(), t.data.data(), nbytes);
      state.emplace_back(t.name, v);
    }
    try {
      o->setState(state);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, at, ": ", e.what_without_backtrace());
    }
    out.emplace_back(r.name, std::move(o));
  }
  return out;
}

}  // namespace pt2q
