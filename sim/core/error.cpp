#include "sim/core/error.h"

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
    : std::runtime_error(format_error(where, what, fix)),
      where_(std::move(where)),
      problem_(what),
      fix_(fix) {}

}  // namespace lacuna
