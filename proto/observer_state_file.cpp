// Encoding and decoding of observer state files.
#include "proto/observer_state_file.h"

#include <stdexcept>

#include "proto/file_header.h"
#include "proto/observer_state.pb.h"

namespace pt2q {
namespace {

constexpr char kMagic[] = "PT2QOBSV";
constexpr size_t kMagicSize = 8;

}  // namespace

std::string encodeObserverStateFile(const std::vector<ObserverStateRecord>& observers, const std::string& producer) {
  proto::ObserverStateFile f;
  f.mutable_header()->set_format_version(kFormatVersion);
  f.mutable_header()->set_producer(producer);
  f.mutable_header()->set_payload_kind("observer_state");
  for (const ObserverStateRecord& r : observers) {
    proto::ObserverState* o = f.add_observers();
    o->set_name(r.name);
    o->set_kind(r.kind);
    proto::ObserverSpec* s = o->mutable_spec();
    s->set_dtype(r.spec.dtype);
    s->set_qscheme(r.spec.qscheme);
    s->set_has_range(r.spec.has_range);
    s->set_quant_min(r.spec.quant_min);
    s->set_quant_max(r.spec.quant_max);
    s->set_reduce_range(r.spec.reduce_range);
    s->set_ch_axis(r.spec.ch_axis);
    s->set_averaging_constant(r.spec.averaging_constant);
    s->set_eps(r.spec.eps);
    s->set_bins(r.spec.bins);
    s->set_scale(r.spec.scale);
    s->set_zero_point(r.spec.zero_point);
    for (const StateTensorRecord& t : r.tensors) {
      proto::StateTensor* p = o->add_tensors();
      p->set_name(t.name);
      p->set_dtype(t.dtype);
      for (int64_t d : t.shape) p->add_shape(d);
      p->set_data(t.data);
    }
  }
  std::string out(kMagic, kMagicSize);
  if (!f.AppendToString(&out)) throw std::runtime_error("pt2q: failed to serialize the observer state");
  return out;
}

std::vector<ObserverStateRecord> decodeObserverStateFile(const std::string& bytes, const std::string& source) {
  if (bytes.size() < kMagicSize || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    throw std::runtime_error("pt2q: " + source +
                             " is not a pt2q observer state file (it does not start with \"PT2QOBSV\")");
  }
  proto::ObserverStateFile f;
  if (!f.ParseFromArray(bytes.data() + kMagicSize, static_cast<int>(bytes.size() - kMagicSize))) {
    throw std::runtime_error("pt2q: " + source + " is truncated or corrupted: its observer state does not parse (" +
                             std::to_string(bytes.size()) + " bytes)");
  }
  if (!f.has_header()) throw std::runtime_error("pt2q: " + source + " has no file header");
  const FileHeader h = decodeFileHeader(f.header().SerializeAsString(), source);
  if (h.payload_kind != "observer_state") {
    throw std::runtime_error("pt2q: " + source + " holds \"" + h.payload_kind + "\", not observer state");
  }
  std::vector<ObserverStateRecord> out;
  for (const proto::ObserverState& o : f.observers()) {
    ObserverStateRecord r;
    r.name = o.name();
    r.kind = o.kind();
    const proto::ObserverSpec& s = o.spec();
    r.spec = {s.dtype(), s.qscheme(), s.has_range(), s.quant_min(), s.quant_max(), s.reduce_range(), s.ch_axis(),
              s.averaging_constant(), s.eps(), s.bins(), s.scale(), s.zero_point()};
    for (const proto::StateTensor& t : o.tensors()) {
      r.tensors.push_back({t.name(), t.dtype(), {t.shape().begin(), t.shape().end()}, t.data()});
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace pt2q
