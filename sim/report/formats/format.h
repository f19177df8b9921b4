// Human-readable quantities with SI units for the terminal table and the SVG,
// and the exact decimal time stamps the trace uses.
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/units.h"

namespace lacuna::report {

// Picks s, ms, µs or ns so that the number has 1-3 digits before the point:
// "12.345 s", "873.210 ms", "412.000 µs", "80 ns".
std::string format_duration(TimeNs t);
// Decimal gigabytes (1e9), two decimals: "74.12 GB".
std::string format_gb(Bytes b);
// 0.4567 → "45.67 %".
std::string format_percent(double fraction);
// Value with an SI prefix (k, M, G, T, P) and three significant decimals:
// 1.5e6, "tokens/s" → "1.500 M tokens/s".
std::string format_si(double value, const std::string& unit);

// A FLOP rate in TFLOP/s ("563.4 TFLOP/s"), or in GFLOP/s below 1 TFLOP/s
// ("17.30 GFLOP/s": the CPU scenarios), so that it never prints as 0.0.
std::string format_flops_rate(double flops_per_s);
// Integer nanoseconds as microseconds with exactly three decimals, no
// floating point: 1234567 → "1234.567", -5 → "-0.005".
std::string micros_exact(int64_t ns);

// Terminal columns of UTF-8 text: fmt pads by code units, but "µ" and "–" are
// several bytes and one column.
size_t display_columns(const std::string& s);
// `s` padded with spaces to `width` columns, on the left (right-aligned) or
// the right (left-aligned); longer text is left as is.
std::string pad_left(const std::string& s, size_t width);
std::string pad_right(const std::string& s, size_t width);

}  // namespace lacuna::report
