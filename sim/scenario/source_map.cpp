#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

namespace {

// "a.b[3]" → "a.b", "a.b" → "a", "a" → "": the field a missing path would sit in.
std::string parent_path(const std::string& path) {
  if (path.empty()) return {};
  if (path.back() == ']') {
    auto open = path.rfind('[');
    return open == std::string::npos ? std::string{} : path.substr(0, open);
  }
  auto dot = path.rfind('.');
  // A dot inside a map key ("efficiency[a.b]") is not a separator.
  auto bracket = path.rfind(']');
  if (dot == std::string::npos || (bracket != std::string::npos && bracket > dot)) {
    if (bracket != std::string::npos) return path.substr(0, bracket + 1);
    return {};
  }
  return path.substr(0, dot);
}

}  // namespace

void SourceMap::add(const std::string& field_path, int line, int column) {
  // The first occurrence wins: a field repeated in a file is reported where it
  // first appears.
  where_.emplace(field_path, std::make_pair(line, column));
}

void SourceMap::set_origin(const std::string& field_path, const std::string& flag) {
  // The last flag wins: it is the one that left the value there.
  origin_[field_path] = flag;
  flags_.push_back(flag);
}

bool SourceMap::from_flag(const SourceLocation& where) const {
  if (where.line != 0) return false;
  for (const std::string& f : flags_) {
    if (where.file == f) return true;
  }
  return false;
}

SourceLocation SourceMap::locate(const std::string& field_path) const {
  SourceLocation loc{file_, 0, 0, field_path};
  for (std::string p = field_path; !p.empty(); p = parent_path(p)) {
    if (auto it = origin_.find(p); it != origin_.end()) {
      loc.file = it->second;
      return loc;
    }
    if (auto it = where_.find(p); it != where_.end()) {
      loc.line = it->second.first;
      loc.column = it->second.second;
      return loc;
    }
  }
  return loc;
}

}  // namespace lacuna::scenario
