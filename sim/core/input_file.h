// Reading an input file whole, safely (docs/reliability.md, "Inputs"). Every
// loader (scenario, calibration profile, compiled program, diff JSON) reads
// through here, so that a directory, a FIFO, a device such as /dev/zero, a
// symlink loop or a file larger than the loader's documented cap is refused
// by name before a byte is read, instead of blocking or growing without bound.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lacuna {

struct InputKind {
  std::string_view what;     // e.g. "scenario file", used in messages
  uint64_t max_bytes;        // the documented cap
  std::string_view fix;      // what to pass instead, for the refusals
};

// Documented caps (docs/reliability.md#inputs). Each is several times the
// largest file lacuna itself writes of that kind (measured there).
inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr InputKind kScenarioInput{"scenario file", 16 * kMiB, "give the path of a .pbtxt or .json scenario"};
inline constexpr InputKind kProfileInput{"calibration profile", 64 * kMiB,
                                         "give a profile written by `lacuna calibrate -o FILE`"};
inline constexpr InputKind kProgramInput{"program file", 512 * kMiB,
                                         "give a program written by `lacuna compile SCENARIO -o FILE.pb`"};
inline constexpr InputKind kDiffInput{"timeline JSON or span trace", 256 * kMiB,
                                      "give a file written by `lacuna simulate` or `lacuna execute` with ‹json› or ‹spans›"};
inline constexpr InputKind kSpanTraceInput{"span trace", 256 * kMiB,
                                           "give a file written by `lacuna simulate` with ‹spans FILE›"};

// Whether a text input starts with a UTF-8 byte-order mark, which every text
// reader refuses by name (protobuf's and JSON's parsers would report a stray
// character at 1:1).
inline bool starts_with_utf8_bom(std::string_view text) { return text.substr(0, 3) == "\xEF\xBB\xBF"; }

// The whole file. Throws lacuna::Error naming `path` when it does not exist,
// is a symlink loop, cannot be opened, is not a regular file, is larger than
// kind.max_bytes, or grows past it while being read.
std::string read_input_file(const std::string& path, const InputKind& kind);

}  // namespace lacuna
