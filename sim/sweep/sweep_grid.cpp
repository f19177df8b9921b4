#include "sim/sweep/sweep_grid.h"

#include <set>

#include <fmt/format.h>

#include "sim/core/option_text.h"
#include "sim/core/error.h"
#include "sim/scenario/edits.h"

namespace lacuna::sweep {
namespace {

[[noreturn]] void fail(const std::string& flag, const std::string& what, const std::string& fix) {
  throw Error(SourceLocation{flag, 0, 0, {}}, what, fix);
}

// "[a,b]" (one bracketed list, the brackets matching each other) → "a,b".
std::string unbracket(const std::string& value) {
  if (value.size() < 2 || value.front() != '[' || value.back() != ']') return value;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c == '"') quoted = !quoted;
    if (quoted) continue;
    if (c == '[') ++depth;
    if (c == ']' && --depth == 0 && i + 1 != value.size()) return value;  // "[a],[b]": not one list
  }
  return value.substr(1, value.size() - 2);
}

}  // namespace

std::vector<std::string> split_values(std::string_view text, const std::string& flag) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      // A backslash escapes the next character inside quotes (text format).
      if (c == '\\' && i + 1 < text.size()) {
        current += c;
        current += text[++i];
        continue;
      }
      if (c == '"') quoted = false;
      current += c;
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '{' || c == '[' || c == '<') ++depth;
    if (c == '}' || c == ']' || c == '>') {
      if (--depth < 0)
        fail(flag, fmt::format("unbalanced '{}' in the list of values", c), "close every {, [ and < you open");
    }
    if (c == ',' && depth == 0) {
      out.push_back(std::move(current));
      current.clear();
      continue;
    }
    current += c;
  }
  if (quoted) fail(flag, "unterminated \" in the list of values", "close the quoted value");
  if (depth != 0) fail(flag, "unclosed {, [ or < in the list of values", "close every {, [ and < you open");
  out.push_back(std::move(current));
  return out;
}

Axis parse_axis(const std::string& assignment) {
  const std::string flag = option_ref("set", assignment);
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos) fail(flag, "expected FIELD=V1,V2,…", "write e.g. ‹set cluster.num_nodes=32,64,128›");
  Axis axis;
  axis.flag = flag;
  axis.field = assignment.substr(0, eq);
  if (axis.field.empty()) fail(flag, "no field before '='", "write e.g. ‹set cluster.num_nodes=32,64,128›");
  const std::string list = assignment.substr(eq + 1);
  if (list.find_first_not_of(" \t") == std::string::npos) {
    fail(flag, "no values to sweep " + axis.field + " over", "list one or more values, e.g. " + axis.field + "=1,2,4");
  }
  axis.values = split_values(list, flag);
  for (size_t i = 0; i < axis.values.size(); ++i) {
    if (axis.values[i].find_first_not_of(" \t") == std::string::npos) {
      fail(flag, fmt::format("value {} of {} is empty", i + 1, axis.values.size()),
           "drop the extra comma; a list value of a repeated field is written in brackets, [a,b]");
    }
  }
  return axis;
}

Grid::Grid(std::vector<Axis> axes, bool zip) : axes_(std::move(axes)), zip_(zip) {
  if (axes_.empty()) {
    throw Error(SourceLocation{"‹set›", 0, 0, {}}, "nothing to sweep",
                "give one or more ‹set FIELD=V1,V2,…›, e.g. ‹set cluster.num_nodes=32,64,128›");
  }
  std::set<std::string> fields;
  for (const Axis& a : axes_) {
    if (!fields.insert(a.field).second) {
      fail(a.flag, a.field + " is swept twice by ‹set›", "give each field one ‹set› with all its values");
    }
  }
  if (zip_) {
    // The longest list sets the length; a list of one value is held fixed
    // at every point (a setting shared by the sweep, e.g. parallel.pp=8).
    const Axis* longest = &axes_.front();
    for (const Axis& a : axes_) {
      if (a.values.size() > longest->values.size()) longest = &a;
    }
    for (const Axis& a : axes_) {
      if (a.values.size() != 1 && a.values.size() != longest->values.size()) {
        throw Error(SourceLocation{"‹zip›", 0, 0, {}},
                    fmt::format("the lists advance together, but {} has {} values and {} has {}", longest->flag,
                                longest->values.size(), a.flag, a.values.size()),
                    "give every ‹set› as many values (or one, held fixed), or drop ‹zip› for every combination");
      }
    }
    size_ = longest->values.size();
    return;
  }
  size_ = 1;
  for (const Axis& a : axes_) {
    if (a.values.size() > kMaxPoints / size_) {
      throw Error(SourceLocation{"‹set›", 0, 0, {}},
                  fmt::format("the grid has more than {} points (the product of the lists' lengths)", kMaxPoints),
                  "sweep fewer values, or advance lists together with ‹zip›");
    }
    size_ *= a.values.size();
  }
}

std::vector<size_t> Grid::value_indices(size_t point) const {
  std::vector<size_t> idx(axes_.size(), 0);
  if (zip_) {
    for (size_t k = 0; k < axes_.size(); ++k) idx[k] = axes_[k].values.size() == 1 ? 0 : point;
    return idx;
  }
  // Mixed radix, the last axis the least significant digit.
  for (size_t k = axes_.size(); k-- > 0;) {
    const size_t n = axes_[k].values.size();
    idx[k] = point % n;
    point /= n;
  }
  return idx;
}

std::vector<std::string> Grid::assignments(size_t point) const {
  const std::vector<size_t> idx = value_indices(point);
  std::vector<std::string> out;
  for (size_t k = 0; k < axes_.size(); ++k) out.push_back(axes_[k].field + "=" + unbracket(axes_[k].values[idx[k]]));
  return out;
}

std::string Grid::describe(size_t point) const {
  const std::vector<size_t> idx = value_indices(point);
  std::string out;
  for (size_t k = 0; k < axes_.size(); ++k) {
    out += fmt::format("{}{}={}", k == 0 ? "" : ", ", axes_[k].field, axes_[k].values[idx[k]]);
  }
  return out;
}

Grid make_grid(const std::vector<std::string>& sets, bool zip) {
  std::vector<Axis> axes;
  for (const std::string& s : sets) axes.push_back(parse_axis(s));
  return Grid(std::move(axes), zip);
}

void check_fields(const Grid& grid, const scenario::Scenario& raw) {
  for (const Axis& a : grid.axes()) {
    for (const std::string& v : a.values) {
      scenario::Scenario copy = raw;
      scenario::set_field(copy, a.field + "=" + unbracket(v), a.flag);
    }
  }
}

}  // namespace lacuna::sweep
