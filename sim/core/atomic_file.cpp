#include "sim/core/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/error.h"
#include "sim/core/interrupt_cleanup.h"
#include "sim/core/output_path.h"

namespace lacuna {
namespace fs = std::filesystem;

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const OutputTarget t = resolve_output(path_, "");
  target_ = t.resolved.string();
  if (t.write_through) {
    f_ = std::fopen(target_.c_str(), "wb");
  } else {
    const fs::path target(target_);
    tmp_ = (target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid())))
               .string();
    slot_ = register_partial_output(tmp_, path_);
    f_ = std::fopen(tmp_.c_str(), "wb");
    // A file replaced keeps its permissions (as editors and `install` do).
    struct stat st {};
    if (f_ != nullptr && ::stat(target_.c_str(), &st) == 0) (void)::fchmod(::fileno(f_), st.st_mode & 07777);
  }
  if (f_ == nullptr) {
    const int err = errno;
    unregister_partial_output(slot_);
    throw Error(SourceLocation{path_, 0, 0, {}}, std::string("cannot create output file: ") + std::strerror(err),
                "check that the directory exists and is writable");
  }
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_ && !tmp_.empty()) std::remove(tmp_.c_str());
  unregister_partial_output(slot_);
}

void AtomicFile::write(std::string_view data) {
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), f_) != data.size()) {
    throw Error(SourceLocation{path_, 0, 0, {}}, std::string("write failed: ") + std::strerror(errno));
  }
}

void AtomicFile::commit() {
  // fsync has no meaning for a pipe or a terminal (EINVAL): only a regular
  // file's data must reach the disk before the rename makes it visible.
  bool flushed = std::fflush(f_) == 0;
  int err = errno;
  if (flushed && !tmp_.empty() && ::fsync(::fileno(f_)) != 0) {
    flushed = false;
    err = errno;
  }
  const bool closed = std::fclose(f_) == 0;
  if (flushed && !closed) err = errno;
  f_ = nullptr;
  if (!flushed || !closed) {
    throw Error(SourceLocation{path_, 0, 0, {}}, std::string("write failed: ") + std::strerror(err));
  }
  if (!tmp_.empty()) {
    std::error_code ec;
    fs::rename(tmp_, target_, ec);
    if (ec) {
      throw Error(SourceLocation{path_, 0, 0, {}}, "cannot rename temporary output into place: " + ec.message());
    }
  }
  committed_ = true;
  unregister_partial_output(slot_);
  slot_ = -1;
}

void write_file_atomically(const std::string& path, std::string_view data) {
  AtomicFile f(path);
  f.write(data);
  f.commit();
}

}  // namespace lacuna
