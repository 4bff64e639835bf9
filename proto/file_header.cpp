// Bridges proto::FileHeader (generated code, system protobuf) to the plain pt2q::FileHeader.
#include "proto/file_header.h"

#include <stdexcept>

#include <google/protobuf/stubs/common.h>

#include "proto/file_header.pb.h"

namespace pt2q {

std::string encodeFileHeader(const FileHeader& header) {
  proto::FileHeader msg;
  msg.set_format_version(header.format_version);
  msg.set_producer(header.producer);
  msg.set_payload_kind(header.payload_kind);
  std::string out;
  if (!msg.SerializeToString(&out)) {
    throw std::runtime_error("pt2q: failed to serialize file header");
  }
  return out;
}

FileHeader decodeFileHeader(const std::string& bytes, const std::string& source) {
  proto::FileHeader msg;
  if (!msg.ParseFromString(bytes)) {
    throw std::runtime_error("pt2q: " + source + " is not a pt2q file: its header does not parse (" +
                             std::to_string(bytes.size()) + " bytes)");
  }
  // proto3 reads a missing field as 0; version 0 was never written, so the header is foreign.
  if (msg.format_version() == 0) {
    throw std::runtime_error("pt2q: " + source + " has no format_version in its header: not a pt2q file");
  }
  if (msg.format_version() > kFormatVersion) {
    throw std::runtime_error("pt2q: " + source + " has format version " + std::to_string(msg.format_version()) +
                             ", newer than the " + std::to_string(kFormatVersion) +
                             " this build reads; upgrade pt2q");
  }
  return FileHeader{msg.format_version(), msg.producer(), msg.payload_kind()};
}

std::string protobufVersion() {
  return google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION);
}

}  // namespace pt2q
