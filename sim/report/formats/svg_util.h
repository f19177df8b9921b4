// Pieces the SVG outputs share (the pipeline picture, the diff picture), so
// that both escape text and place time ticks the same way and draw idle time
// with the same hatch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lacuna::report::svg {

// The page layout both pictures share: labels left of kLeft, the time axis
// kPlotWidth wide, the title and subtitle above kTop.
inline constexpr double kLeft = 200;
inline constexpr double kPlotWidth = 1400;
inline constexpr double kRight = 30;
inline constexpr double kTop = 64;

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

// The horizontal time scale of a picture: x = left + ns · px_per_ns, over
// [0, total_ns], with ticks every tick_step(total_ns).
struct TimeAxis {
  double left = 0;
  double px_per_ns = 0;
  int64_t total_ns = 1;
  double x(int64_t ns) const { return left + static_cast<double>(ns) * px_per_ns; }
};

// The XML declaration, the <svg> element (width × height px), the idle
// hatch pattern (fill="url(#idle)") and a white background.
void begin_document(std::string& out, double width, double height);
// A bold title at y 24 and a grey subtitle at y 44, from x.
void title(std::string& out, double x, std::string_view title, std::string_view subtitle);
// Light vertical grid lines at every tick, from top to bottom.
void grid(std::string& out, const TimeAxis& axis, double top, double bottom);
// The axis line at y, its ticks with labels, and "time" below.
void time_axis(std::string& out, const TimeAxis& axis, double y);

}  // namespace lacuna::report::svg
