// FileHeader: round trip, and clear errors for foreign, truncated and newer-version bytes.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "proto/file_header.h"

namespace pt2q {
namespace {

std::string errorOf(const std::string& bytes) {
  try {
    decodeFileHeader(bytes, "model.pt2q");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Encoding then decoding gives back every field.
TEST(FileHeaderTest, RoundTrips) {
  const FileHeader h{kFormatVersion, "pt2q test", "graph"};
  const FileHeader back = decodeFileHeader(encodeFileHeader(h), "mem");
  EXPECT_EQ(back.format_version, kFormatVersion);
  EXPECT_EQ(back.producer, "pt2q test");
  EXPECT_EQ(back.payload_kind, "graph");
}

// A file written by a newer pt2q is refused with both versions in the message.
TEST(FileHeaderTest, RejectsNewerVersion) {
  const std::string msg = errorOf(encodeFileHeader(FileHeader{kFormatVersion + 1, "future", "graph"}));
  EXPECT_NE(msg.find("model.pt2q"), std::string::npos) << msg;
  EXPECT_NE(msg.find("format version " + std::to_string(kFormatVersion + 1)), std::string::npos) << msg;
}

// Bytes that are not a header (random text, a truncated varint, empty) are refused by name.
TEST(FileHeaderTest, RejectsForeignAndTruncatedBytes) {
  EXPECT_NE(errorOf("PK\x03\x04 this is a zip file").find("not a pt2q file"), std::string::npos);
  const std::string full = encodeFileHeader(FileHeader{kFormatVersion, "p", "graph"});
  EXPECT_NE(errorOf(full.substr(0, full.size() - 3)).find("model.pt2q"), std::string::npos);
  EXPECT_NE(errorOf("").find("no format_version"), std::string::npos);
}

}  // namespace
}  // namespace pt2q
