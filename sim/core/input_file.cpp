#include "sim/core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna {

namespace {

std::string file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string size_text(uint64_t bytes) {
  if (bytes >= kMiB) return fmt::format("{} MiB", bytes / kMiB);
  return fmt::format("{} bytes", bytes);
}

[[noreturn]] void fail_input(const std::string& path, const std::string& what, std::string_view fix) {
  throw Error(SourceLocation{path, 0, 0, {}}, what, std::string(fix));
}

[[noreturn]] void fail_errno(const std::string& path, const InputKind& kind, int err) {
  switch (err) {
    case ENOENT:
      fail_input(path, fmt::format("{} not found", kind.what), "check the path (relative paths start at the current directory)");
    case ELOOP:
      fail_input(path, "the path is a loop of symbolic links", "point the link at the file itself");
    case ENOTDIR:
      fail_input(path, "a part of the path is not a directory", "check the path");
    case EACCES:
    case EPERM:
      fail_input(path, fmt::format("permission denied reading the {}", kind.what), "check the file's permissions");
    default:
      fail_input(path, fmt::format("cannot read the {}: {}", kind.what, std::strerror(err)), kind.fix);
  }
}

void require_regular(const std::string& path, mode_t mode, const InputKind& kind) {
  if (!S_ISREG(mode)) fail_input(path, fmt::format("{}: a {} must be a regular file", file_type_name(mode), kind.what), kind.fix);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::string& path, const InputKind& kind) {
  if (path.empty()) fail_input(path, fmt::format("empty path for the {}", kind.what), kind.fix);
  // stat first: opening a FIFO for reading would block until a writer came.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_errno(path, kind, errno);
  require_regular(path, st.st_mode, kind);
  const auto too_large = [&](uint64_t bytes) {
    fail_input(path,
         fmt::format("the file is {} bytes, above the {} a {} may have (docs/reliability.md#inputs)", bytes,
                     size_text(kind.max_bytes), kind.what),
         kind.fix);
  };
  if (static_cast<uint64_t>(st.st_size) > kind.max_bytes) too_large(static_cast<uint64_t>(st.st_size));
  Fd f;
  // O_NONBLOCK: if the path was swapped for a FIFO since the stat, open
  // returns at once and fstat below refuses it.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) fail_errno(path, kind, errno);
  if (::fstat(f.fd, &st) != 0) fail_errno(path, kind, errno);
  require_regular(path, st.st_mode, kind);
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t have = 0;
  for (;;) {
    if (have == text.size()) {
      // The file may have grown since fstat: keep reading, within the cap.
      if (text.size() >= kind.max_bytes + 1) too_large(text.size());
      text.resize(std::min<uint64_t>(kind.max_bytes + 1, std::max<uint64_t>(text.size() * 2, 4096)));
    }
    const ssize_t n = ::read(f.fd, text.data() + have, text.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(path, kind, errno);
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (have > kind.max_bytes) too_large(have);
  text.resize(have);
  return text;
}

}  // namespace lacuna
