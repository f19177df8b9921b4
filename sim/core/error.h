// One error type for everything a user can get wrong: it names the file, the
// line and the field, says what is wrong and what would fix it. Options it
// points to are references (option_text.h) that the front end spells.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace lacuna {

struct SourceLocation {
  std::string file;   // empty when not from a file
  int line = 0;       // 1-based; 0 when unknown
  int column = 0;     // 1-based; 0 when unknown
  std::string field;  // dotted path, e.g. "parallel.tp"; empty when not a field
};

// The location of a field alone (no file, line or column): for errors about
// presets and derived values, which come from no file.
inline SourceLocation field(const std::string& path) {
  SourceLocation where;
  where.field = path;
  return where;
}

class Error : public std::runtime_error {
 public:
  // `what` says what is wrong; `fix` (optional) what would fix it.
  Error(SourceLocation where, const std::string& what, const std::string& fix = {});
  explicit Error(const std::string& what) : Error(SourceLocation{}, what) {}

  const SourceLocation& where() const { return where_; }
  const std::string& problem() const { return problem_; }
  const std::string& fix() const { return fix_; }
  // The message with its option references (option_text.h) unspelled, for
  // a front end to spell; what() is the neutral spelling of the same text.
  const std::string& raw() const { return raw_; }

  // Every problem of one input at once (validation reports them all, not one
  // per run). One error: that error unchanged. Several: sorted in file order
  // (line, column; unlocated ones last), where() names the file only, and
  // problem() lists them numbered, one per line, each "line:column: field:
  // what (fix)". parts() holds them one by one (empty for a single error).
  static Error all_of(std::vector<Error> errors);
  const std::vector<Error>& parts() const { return parts_; }

 private:
  SourceLocation where_;
  std::string raw_;
  std::string problem_;
  std::string fix_;
  std::vector<Error> parts_;
};

// A broken invariant inside lacuna (a bug, not bad input): the CLI reports
// it as an internal error and exits 70, never as a user error (exit 2).
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

// "file:line:col: field: what (fix)"
std::string format_error(const SourceLocation& where, const std::string& what, const std::string& fix);

}  // namespace lacuna
