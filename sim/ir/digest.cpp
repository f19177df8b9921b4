#include "sim/ir/digest.h"

#include <climits>
#include <cstdint>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "sim/core/error.h"

namespace lacuna::ir {

namespace {

constexpr std::string_view kPrefix = "fnv1a64:";

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV offset basis (64-bit)
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;  // FNV prime (64-bit)
  }
  return h;
}

}  // namespace

bool serialize_deterministically(const Program& program, std::string* out) {
  if (program.ByteSizeLong() > static_cast<size_t>(INT32_MAX)) return false;
  out->clear();
  google::protobuf::io::StringOutputStream stream(out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  // Map fields (GpuSpec.efficiency) would otherwise come out in hash order.
  coded.SetSerializationDeterministic(true);
  return program.SerializeToCodedStream(&coded);
}

std::string content_digest(const Program& program) {
  std::string bytes;
  bool ok = false;
  if (program.info().content_digest().empty()) {
    ok = serialize_deterministically(program, &bytes);
  } else {
    Program copy = program;
    copy.mutable_info()->clear_content_digest();
    ok = serialize_deterministically(copy, &bytes);
  }
  if (!ok) throw Error("the program is larger than protobuf's 2 GiB limit and has no digest");
  return fmt::format("{}{:016x}", kPrefix, fnv1a64(bytes));
}

void stamp_content_digest(Program& program) {
  program.mutable_info()->clear_content_digest();
  std::string digest = content_digest(program);
  program.mutable_info()->set_content_digest(std::move(digest));
}

DigestCheck check_content_digest(Program& program, const std::string& file) {
  const SourceLocation where{file, 0, 0, "info.content_digest"};
  // Cleared while hashing and put back: no copy of a program that may be
  // hundreds of MB.
  const std::string recorded = program.info().content_digest();
  if (recorded.empty()) {
    throw Error(where, "the program has no content digest (written by an older lacuna, or not by `lacuna compile`)",
                "compile the scenario again: `lacuna compile SCENARIO -o FILE.pb`; a deliberate edit may set "
                "info.content_digest to \"unchecked\"");
  }
  if (recorded == kUncheckedDigest) return DigestCheck::kUnchecked;
  program.mutable_info()->clear_content_digest();
  const std::string actual = content_digest(program);
  program.mutable_info()->set_content_digest(recorded);
  if (recorded != actual) {
    throw Error(where,
                fmt::format("the program's content does not match its digest (recorded {}, content gives {}): the file "
                            "was corrupted or edited after `lacuna compile` wrote it",
                            recorded, actual),
                "compile the scenario again: `lacuna compile SCENARIO -o FILE.pb`; a deliberate edit may set "
                "info.content_digest to \"unchecked\"");
  }
  return DigestCheck::kVerified;
}

}  // namespace lacuna::ir
