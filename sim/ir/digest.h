// The program's content digest (ProgramInfo.content_digest): what lets a
// loaded .pb prove it is the program `lacuna compile` wrote, byte for byte in
// meaning. A flipped or edited byte that still parses changes the digest, so
// the program is refused by name instead of simulating something else.
// FNV-1a 64 detects corruption and accidental edits; it is not a signature.
#pragma once

#include <string>
#include <string_view>

#include "sim/proto/program.pb.h"

namespace lacuna::ir {

// The program serialized with deterministic map order (the same program
// gives the same bytes). Returns false when it exceeds protobuf's 2 GiB.
bool serialize_deterministically(const Program& program, std::string* out);

// "fnv1a64:" + 16 lowercase hex digits over serialize_deterministically of
// `program` with info.content_digest cleared.
std::string content_digest(const Program& program);

// Sets info.content_digest to content_digest(program).
void stamp_content_digest(Program& program);

// The digest a hand-edited program declares so that it loads anyway
// (docs/reliability.md#programs): the edit is then marked in the file itself.
inline constexpr std::string_view kUncheckedDigest = "unchecked";

enum class DigestCheck { kVerified, kUnchecked };

// kVerified when info.content_digest matches the program's content;
// kUnchecked when it is kUncheckedDigest. Throws lacuna::Error naming `file`
// when it is missing or does not match. The program is left as it was (the
// field is cleared while hashing, so that no copy is made).
DigestCheck check_content_digest(Program& program, const std::string& file);

}  // namespace lacuna::ir
