// The NCCL loader: a clear error (never a crash) when the library is absent,
// and the version when the toolkit's libnccl is there.
#include "calib/nccl_loader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "calib/nccl_collectives.h"
#include "sim/core/error.h"

namespace lacuna::calibrate::nccl {
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

TEST(CalibNcclLoader, BogusPathIsAClearError) {
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

TEST(CalibNcclLoader, ALibraryThatIsNotNcclIsAClearError) {
  ScopedEnv env("LACUNA_NCCL", "libm.so.6");  // loads, but has no NCCL symbols
  try {
    Library::load();
    FAIL() << "accepted libm as NCCL";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing ncclGetVersion"), std::string::npos) << e.what();
  }
}

TEST(CalibNcclLoader, LoadsTheToolkitsNcclWhenPresent) {
  const std::string path = "/usr/local/cuda/lib64/libnccl.so.2";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed";
  ScopedEnv env("LACUNA_NCCL", path);
  const Library lib = Library::load();  // ncclGetVersion needs no GPU
  EXPECT_EQ(lib.path(), path);
  EXPECT_GT(lib.version_code(), 20000);
  EXPECT_EQ(lib.version().rfind("2.", 0), 0u) << lib.version();
}

TEST(CalibNcclLoader, VersionStrings) {
  EXPECT_EQ(version_string(22809), "2.28.9");
  EXPECT_EQ(version_string(21805), "2.18.5");
  EXPECT_EQ(version_string(2708), "2.7.8");
  EXPECT_EQ(version_string(0), "");
}

TEST(CalibNcclBench, SizesAndGroups) {
  const auto sizes = collective_sizes(1024, int64_t{4} << 30);
  ASSERT_EQ(sizes.size(), 12u);  // 1 KB × 4^0 .. 4^11 = 4 GB
  EXPECT_EQ(sizes.front(), 1024);
  EXPECT_EQ(sizes.back(), int64_t{4} << 30);
  EXPECT_EQ(collective_group_sizes(8), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(collective_group_sizes(6), (std::vector<int>{2, 4, 6}));
  EXPECT_TRUE(collective_group_sizes(1).empty());
#ifndef LACUNA_HAVE_CUDA
  EXPECT_FALSE(collectives_built());
  try {
    run_collective_benchmarks({});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not built with CUDA"), std::string::npos) << e.what();
  }
#endif
}

}  // namespace
}  // namespace lacuna::calibrate::nccl
