// The NCCL loader: a clear error (never a crash) when the library is absent,
// and the version when the toolkit's libnccl is there.
#include "kernels/nccl_loader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "sim/core/error.h"

namespace lacuna::kernels::nccl {
namespace {

// Sets LACUNA_NCCL for one scope and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NcclLoader, BogusPathIsAClearError) {
  ScopedEnv env("LACUNA_NCCL", "/nonexistent/libnccl.so.2");
  try {
    Library::load();
    FAIL() << "loaded NCCL from a path that does not exist";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot load NCCL"), std::string::npos) << what;
    EXPECT_NE(what.find("/nonexistent/libnccl.so.2"), std::string::npos) << what;
    EXPECT_NE(what.find("LACUNA_NCCL"), std::string::npos) << what;
  }
}

TEST(NcclLoader, ALibraryThatIsNotNcclIsAClearError) {
  ScopedEnv env("LACUNA_NCCL", "libm.so.6");  // loads, but has no NCCL symbols
  try {
    Library::load();
    FAIL() << "accepted libm as NCCL";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing ncclGetVersion"), std::string::npos) << e.what();
  }
}

TEST(NcclLoader, LoadsTheToolkitsNcclWhenPresent) {
  const std::string path = "/usr/local/cuda/lib64/libnccl.so.2";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed";
  ScopedEnv env("LACUNA_NCCL", path);
  const Library lib = Library::load();  // ncclGetVersion needs no GPU
  EXPECT_EQ(lib.path(), path);
  EXPECT_GT(lib.version_code(), 20000);
  EXPECT_EQ(lib.version().rfind("2.", 0), 0u) << lib.version();
}

TEST(NcclLoader, VersionStrings) {
  EXPECT_EQ(version_string(22809), "2.28.9");
  EXPECT_EQ(version_string(21805), "2.18.5");
  EXPECT_EQ(version_string(2708), "2.7.8");
  EXPECT_EQ(version_string(0), "");
}

}  // namespace
}  // namespace lacuna::kernels::nccl
