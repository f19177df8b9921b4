// The two file syntaxes, before presets and validation: text format and JSON
// into a raw Scenario plus the location of every field written.
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

// Both throw lacuna::Error with line:column for syntax errors, unknown fields
// and wrongly typed values. `locations` must already carry the file name.
Scenario parse_text_format(std::string_view text, SourceMap& locations);
Scenario parse_json_format(std::string_view text, SourceMap& locations);

// Any message in protobuf text format (calibration profiles too): the first
// syntax error as lacuna::Error at its line:column with `hint`, and the
// location of every field written recorded in `locations` as dotted paths
// ("ops[3].points[12].time_ns", map entries by key).
void parse_text_message(std::string_view text, google::protobuf::Message& message, SourceMap& locations,
                        const std::string& hint);

// Rejects text that is not UTF-8, naming the line and column of the first bad byte.
void check_utf8(std::string_view text, const SourceMap& locations);
// The offset of the first byte of `text` that is not part of valid UTF-8
// (overlong forms and surrogates are invalid) or is NUL; npos when none.
size_t first_invalid_utf8(std::string_view text);

}  // namespace lacuna::scenario
