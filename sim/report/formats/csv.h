// CSV text for the `--csv FILE` outputs (simulate, compare, sweep;
// docs/outputs.md#csv): RFC 4180 quoting and one way to print numbers, so
// that every CSV lacuna writes parses the same way and is byte-identical run
// to run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lacuna::report::csv {

// A field as RFC 4180 wants it: quoted when it holds a comma, a quote, a
// line break or leading/trailing spaces, with quotes doubled; as is otherwise.
std::string field(std::string_view text);

// One record: the fields escaped, joined by commas, ending in "\n".
std::string row(const std::vector<std::string>& fields);

// A number in its shortest round-trip decimal form ("0.4311", "174.566",
// "1e-07"); integral values of magnitude below 2^53 without a fraction
// ("8", "3072"). Not finite: an empty field (CSV has no NaN).
std::string number(double value);

}  // namespace lacuna::report::csv
