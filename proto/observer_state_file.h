// Observer state files (proto/observer_state.proto) as plain C++ records, so that code which
// sees torch's headers never includes generated protobuf code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pt2q {

struct ObserverSpecRecord {
  std::string dtype;
  std::string qscheme;
  bool has_range = false;
  int64_t quant_min = 0;
  int64_t quant_max = 0;
  bool reduce_range = false;
  int64_t ch_axis = 0;
  double averaging_constant = 0.01;
  float eps = 0.0f;
  int64_t bins = 2048;
  double scale = 1.0;
  int64_t zero_point = 0;
};

struct StateTensorRecord {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;  // dense, row-major, little-endian
};

struct ObserverStateRecord {
  std::string name;
  std::string kind;
  ObserverSpecRecord spec;
  std::vector<StateTensorRecord> tensors;
};

/// The bytes of an observer state file: an 8-byte magic "PT2QOBSV", then the message.
std::string encodeObserverStateFile(const std::vector<ObserverStateRecord>& observers, const std::string& producer);

/// Decodes an observer state file. Throws std::runtime_error naming `source` for a foreign,
/// truncated or corrupted file, or one from a newer format version; never crashes on bad bytes.
std::vector<ObserverStateRecord> decodeObserverStateFile(const std::string& bytes, const std::string& source);

}  // namespace pt2q
