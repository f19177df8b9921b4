#include "kernels/device_info.h"

#include <gtest/gtest.h>

// Without a GPU (CI) the query must report none with a reason, not crash.
TEST(DeviceInfo, ReportsGpusOrAReason) {
  const auto report = lacuna::kernels::query_devices();
  if (report.gpus.empty()) {
    EXPECT_FALSE(report.why_none.empty());
    GTEST_SKIP() << "no GPU: " << report.why_none;
  }
  for (const auto& g : report.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.memory_bytes, 0);
    EXPECT_GT(g.sm_count, 0);
  }
}
