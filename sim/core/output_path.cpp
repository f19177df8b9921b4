#include "sim/core/output_path.h"

#include <system_error>

#include "sim/core/error.h"

namespace lacuna {
namespace fs = std::filesystem;
namespace {

// The kernel's own bound on symlinks followed in one lookup (Linux MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;

[[noreturn]] void fail_output(const std::string& path, std::string_view option, const std::string& what,
                       const std::string& fix = {}) {
  throw Error(SourceLocation{path, 0, 0, std::string(option)}, what, fix);
}

// The file itself when it exists, else its parent directory made absolute
// with the name appended: two spellings of one target compare equal.
fs::path identity(const fs::path& resolved) {
  std::error_code ec;
  const fs::path whole = fs::weakly_canonical(resolved, ec);
  return ec ? fs::absolute(resolved, ec) : whole;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool eq = fs::equivalent(a, b, ec);
    if (!ec) return eq;
  }
  return identity(a) == identity(b);
}

}  // namespace

OutputTarget resolve_output(const std::string& path, std::string_view option) {
  if (path.empty())
    fail_output(path, option, "the output path is empty", "give a file name, or leave the option out");
  OutputTarget out;
  std::error_code ec;
  // The kernel follows the links first: /dev/stdout is a link to a "pipe:[N]"
  // that no path names, so what it reaches is asked of stat(2).
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    if (ec == std::errc::too_many_symbolic_link_levels)
      fail_output(path, option, "the output path is a symlink loop", "point the link at a file, or give another path");
    fail_output(path, option, "cannot inspect the output path: " + ec.message());
  }
  if (fs::is_directory(st)) {
    const bool link = fs::is_symlink(fs::symlink_status(path, ec));
    fail_output(path, option, link ? "points at a directory, not a file" : "is a directory, not a file",
         "give a file name inside it, e.g. " + (fs::path(path) / "out.json").string());
  }
  if (fs::exists(st)) {
    // A file nobody may write was made read-only on purpose: replacing it by
    // a rename, which only the directory's permissions govern, would undo
    // that (and root would replace it whatever its mode).
    constexpr fs::perms kWrite = fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write;
    if (fs::is_regular_file(st) && (st.permissions() & kWrite) == fs::perms::none)
      fail_output(path, option, "is a read-only file; lacuna does not replace a file nobody may write",
                  "make it writable (chmod u+w " + path + ") or give another path");
    // A device, FIFO or socket is written in place through the path as
    // given; a regular file is replaced where it really is.
    out.write_through = !fs::is_regular_file(st);
    out.resolved = out.write_through ? fs::path(path) : fs::canonical(path, ec);
    if (ec) fail_output(path, option, "cannot resolve the output path: " + ec.message());
    return out;
  }
  // A new file, possibly through a dangling symlink: created where it points.
  fs::path p(path);
  for (int hops = 0;; ++hops) {
    if (!fs::is_symlink(fs::symlink_status(p, ec))) break;
    if (hops == kMaxSymlinks)
      fail_output(path, option, "the output path is a symlink loop (more than 40 links followed)",
           "point the link at a file, or give another path");
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) fail_output(path, option, "cannot read the symlink: " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  out.resolved = p;
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(parent, ec))
    fail_output(path, option, "the directory " + parent.string() + " does not exist", "create it first");
  return out;
}

void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  std::vector<std::pair<const NamedPath*, OutputTarget>> seen;
  for (const NamedPath& o : outputs) {
    if (o.path.empty()) continue;
    OutputTarget t = resolve_output(o.path, o.option);
    for (const NamedPath& in : inputs)
      if (!in.path.empty() && same_file(t.resolved, in.path))
        fail_output(o.path, o.option,
             "is the same file as the input " + in.path + " (" + in.option + "); writing it would destroy the input",
             "write the output somewhere else");
    // Two outputs may share a device (both streamed to /dev/null) but not a file.
    for (const auto& [other, ot] : seen)
      if (!t.write_through && same_file(t.resolved, ot.resolved))
        fail_output(o.path, o.option, "is the same file as " + other->option + " " + other->path + "; one would overwrite the other",
             "give each output its own path");
    seen.emplace_back(&o, std::move(t));
  }
}

}  // namespace lacuna
