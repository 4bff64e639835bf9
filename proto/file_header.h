// Version header of pt2q files: encode, decode and check, without exposing generated code.
#pragma once

#include <cstdint>
#include <string>

namespace pt2q {

/// Format version this build writes; it reads every version up to and including it.
constexpr uint32_t kFormatVersion = 1;

/// Decoded form of proto::FileHeader. Plain struct so that torch-including code can use it.
struct FileHeader {
  uint32_t format_version = kFormatVersion;
  std::string producer;
  std::string payload_kind;
};

/// Serializes `header` to protobuf wire bytes.
std::string encodeFileHeader(const FileHeader& header);

/// Parses wire bytes. Throws std::runtime_error naming `source` when the bytes are not a
/// header, or when the file comes from a newer format version than this build reads.
FileHeader decodeFileHeader(const std::string& bytes, const std::string& source);

/// Version string of the protobuf runtime pt2q was linked with (for bug reports).
std::string protobufVersion();

}  // namespace pt2q
