// Reading and writing calibration profiles (sim/proto/calibration.proto) as
// protobuf text. Every problem is a lacuna::Error naming the file, the line of
// the offending field and what is wrong, like scenario files.
#pragma once

#include <string>
#include <string_view>

#include "sim/proto/calibration.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::calibration {

// Reads, parses and validates (validate_profile). Syntax errors carry
// file:line:column; validation errors the line of the field.
calib::CalibrationProfile read_profile(const std::string& path);

// The same from text already in memory; `display_name` is used as the file
// name in errors.
calib::CalibrationProfile parse_profile(std::string_view text, const std::string& display_name);

// Checks what the schema cannot say (format_version 1, device set, positive
// times with min ≤ median ≤ max, unique shapes, sane fits); throws the first
// problem. `locations` (from parsing; may be empty) gives the lines.
void validate_profile(const calib::CalibrationProfile& profile, const scenario::SourceMap& locations);

// Validates, then writes protobuf text with a short header comment,
// atomically (the file appears complete or not at all). Deterministic: the
// same profile gives the same bytes.
void write_profile(const calib::CalibrationProfile& profile, const std::string& path);

// The text write_profile writes (header comment included).
std::string format_profile(const calib::CalibrationProfile& profile);

}  // namespace lacuna::calibration
