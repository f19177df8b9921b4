// Running the lacuna binary from end-to-end tests.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/parallel/processes.h"

namespace lacuna::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// A shell command's exit code and output (stdout and stderr together when
// the command redirects them).
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CommandResult run_lacuna(const std::string& args) {
  return run_command(std::string(LACUNA_BINARY) + " " + args + " 2>&1");
}

// Why `mpirun` cannot run lacuna here ("" when it can): a build without MPI,
// no mpirun on PATH, or a sanitizer build (MPI's own allocations would be
// reported as leaks).
inline std::string mpi_unavailable() {
#if defined(LACUNA_SANITIZED)
  return "MPI's own allocations are reported as leaks under AddressSanitizer";
#else
  if (!parallel::built_with_mpi()) return "lacuna was built without MPI";
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "no mpirun on PATH";
  return "";
#endif
}

// `mpirun -np N lacuna ARGS` on this host (as root too, more processes than
// cores allowed), stdout and stderr together.
inline CommandResult run_lacuna_mpi(int processes, const std::string& args) {
  return run_command("mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(processes) + " " +
                     std::string(LACUNA_BINARY) + " " + args + " 2>&1");
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("lacuna-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

inline std::string source_path(const std::string& rel) { return std::string(LACUNA_SOURCE_DIR) + "/" + rel; }

}  // namespace lacuna::testing
