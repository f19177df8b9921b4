// Pieces the SVG outputs share (the pipeline picture, the diff picture), so
// that both escape text and place time ticks the same way and draw idle time
// with the same hatch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lacuna::report::svg {

// The idle (bubble) background: fill and hatch stroke.
inline constexpr const char* kIdleFill = "#fde2e2";
inline constexpr const char* kIdleHatch = "#f2a5a5";

// Text and attribute values: & < > " ' escaped.
std::string xml_escape(std::string_view s);

// A tick spacing of 1, 2 or 5 × 10^k ns giving at most about 12 ticks over
// `total_ns` (> 0).
int64_t tick_step(int64_t total_ns);

// A tick's label in ms with as many decimals as `step_ns` needs ("12.5 ms").
std::string tick_label(int64_t ns, int64_t step_ns);

}  // namespace lacuna::report::svg
