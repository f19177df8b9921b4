// Output files appear complete or not at all: content goes to a temporary
// name in the same directory and is renamed over the target on commit().
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace lacuna {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // throws lacuna::Error if it cannot be created
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless committed

  void write(std::string_view data);
  std::FILE* handle() { return f_; }  // for streaming writers (fmt::print(handle(), ...))
  void commit();                      // flush, close, rename; throws on failure

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// Convenience: write a whole string atomically.
void write_file_atomically(const std::string& path, std::string_view data);

}  // namespace lacuna
