// The outputs of `lacuna diff` other than the picture: the terminal text and
// the --json document (docs/diff.md). Both deterministic.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "sim/report/analyses/diff.h"

namespace lacuna::report {

// The terminal report; the bubble lists show their `top` largest entries.
std::string format_diff(const DiffReport& r, size_t top = 10);

// The whole report as JSON, one top-level key per line (bubble lists in full).
std::string diff_json(const DiffReport& r);

// A relative error as a signed percentage: 0.0504 → "+5.04 %"; unset → "—".
std::string format_error_percent(const std::optional<double>& error);

}  // namespace lacuna::report
