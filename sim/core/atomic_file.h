// Output files appear complete or not at all: content goes to a temporary
// name beside the target and is renamed over it on commit(). The target is
// the path with its symlinks followed (the link itself stays); an existing
// device, FIFO or other non-regular file is written through in place, so
// `--json /dev/stdout` streams and `/dev/full` reports its error
// (sim/core/output_path.h). A temporary file is removed if the process is
// interrupted by SIGINT, SIGTERM or SIGHUP (sim/core/interrupt_cleanup.h).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace lacuna {

class AtomicFile {
 public:
  // Throws lacuna::Error if the path is refused (resolve_output) or the file
  // cannot be created.
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless committed

  void write(std::string_view data);
  std::FILE* handle() { return f_; }  // for streaming writers (fmt::print(handle(), ...))
  void commit();                      // flush, close, rename; throws on failure

  const std::string& path() const { return path_; }

 private:
  std::string path_;    // as given (messages)
  std::string target_;  // symlinks followed
  std::string tmp_;     // empty when writing through
  std::FILE* f_ = nullptr;
  int slot_ = -1;       // interrupt_cleanup registration
  bool committed_ = false;
};

// Convenience: write a whole string atomically.
void write_file_atomically(const std::string& path, std::string_view data);

}  // namespace lacuna
