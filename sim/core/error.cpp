#include "sim/core/error.h"

#include "sim/core/option_text.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

namespace lacuna {

std::string format_error(const SourceLocation& where, const std::string& what, const std::string& fix) {
  std::string out;
  if (!where.file.empty()) {
    out += where.file;
    if (where.line > 0) {
      out += ":" + std::to_string(where.line);
      if (where.column > 0) out += ":" + std::to_string(where.column);
    }
    out += ": ";
  }
  if (!where.field.empty()) out += where.field + ": ";
  out += what;
  if (!fix.empty()) out += " (" + fix + ")";
  return out;
}

Error::Error(SourceLocation where, const std::string& what, const std::string& fix)
    : std::runtime_error(neutral_options(format_error(where, what, fix))),
      where_(std::move(where)),
      raw_(format_error(where_, what, fix)),
      problem_(what),
      fix_(fix) {}

Error Error::all_of(std::vector<Error> errors) {
  if (errors.size() == 1) return errors.front();
  std::stable_sort(errors.begin(), errors.end(), [](const Error& a, const Error& b) {
    const auto key = [](const Error& e) {
      return std::make_pair(e.where().line > 0 ? e.where().line : INT32_MAX, e.where().column);
    };
    return key(a) < key(b);
  });
  std::string list = std::to_string(errors.size()) + " problems:";
  for (size_t i = 0; i < errors.size(); ++i) {
    const SourceLocation& w = errors[i].where();
    std::string at;
    if (w.line > 0) at = std::to_string(w.line) + (w.column > 0 ? ":" + std::to_string(w.column) : "") + ": ";
    list += "\n  " + std::to_string(i + 1) + ". " + at + format_error(SourceLocation{{}, 0, 0, w.field},
                                                                       errors[i].problem(), errors[i].fix());
  }
  const std::string file = errors.empty() ? std::string() : errors.front().where().file;
  Error out(SourceLocation{file, 0, 0, {}}, list);
  out.parts_ = std::move(errors);
  return out;
}

}  // namespace lacuna
