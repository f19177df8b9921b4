#include "sim/core/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "sim/core/error.h"

namespace lacuna {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (f_ == nullptr) {
    throw Error(SourceLocation{path_, 0, 0, {}},
                std::string("cannot create output file: ") + std::strerror(errno),
                "check that the directory exists and is writable");
  }
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_) std::remove(tmp_.c_str());
}

void AtomicFile::write(std::string_view data) {
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), f_) != data.size()) {
    throw Error(SourceLocation{path_, 0, 0, {}}, std::string("write failed: ") + std::strerror(errno));
  }
}

void AtomicFile::commit() {
  const bool flushed = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!flushed || !closed) {
    throw Error(SourceLocation{path_, 0, 0, {}}, std::string("write failed: ") + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    throw Error(SourceLocation{path_, 0, 0, {}}, "cannot rename temporary output into place: " + ec.message());
  }
  committed_ = true;
}

void write_file_atomically(const std::string& path, std::string_view data) {
  AtomicFile f(path);
  f.write(data);
  f.commit();
}

}  // namespace lacuna
