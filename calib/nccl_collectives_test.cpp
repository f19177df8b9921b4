// The NCCL collective benchmarks' sizes and groups, and their refusal in a
// build without CUDA (the loader itself: kernels/nccl_loader_test.cpp).
#include "calib/nccl_collectives.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::calibrate {
namespace {

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
}  // namespace lacuna::calibrate
