// The binary messages the CUDA backend's processes exchange (runtime/
// cuda_launch.h): through pipes between the built-in launcher's parent and
// its children, and through files in the rendezvous directory under mpirun.
// Host-only, tested on the CPU (span_io_test.cpp).
//
// A message is a 16-byte header and a payload, all little-endian:
//   u32 magic "LCNX" | u16 version | u16 kind | u64 payload bytes | payload
// Kinds: kIds (opaque bytes: the NCCL unique ids every rank needs) and
// kOutcome (what one rank did: its spans or its error). Anything short, with
// a wrong magic, version or kind, or with bytes left over is a lacuna::Error
// naming the source ("child for rank 3", a file path).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/executor.h"

namespace lacuna::runtime {

enum class MessageKind : std::uint16_t { kIds = 1, kOutcome = 2 };

inline constexpr std::size_t kMessageHeaderBytes = 16;
inline constexpr std::uint16_t kMessageVersion = 1;

// What one executed rank (one process) reports back.
struct RankOutcome {
  std::int32_t rank = 0;
  std::string error;  // empty: success
  std::vector<ExecutedSpan> spans;
  std::vector<std::int64_t> iteration_ns;
  std::int32_t emulated_ops = 0;
};

std::string encode_message(MessageKind kind, std::string_view payload);
// Checks the header; returns the payload length it announces.
std::uint64_t payload_size(std::string_view header, MessageKind expected, const std::string& source);
// A whole message: header + exactly its payload. Returns the payload.
std::string_view decode_message(std::string_view message, MessageKind expected, const std::string& source);

std::string encode_outcome(const RankOutcome& outcome);  // a whole kOutcome message
RankOutcome decode_outcome(std::string_view message, const std::string& source);

}  // namespace lacuna::runtime
